// Package localstack runs housekeeper's whole stack on one machine without Docker — a real
// kube-apiserver and etcd, nats-server with JetStream, Azurite, an S3 server, a GCS server,
// the bridge and every function — applies the examples, runs a real etcd with etcd-backup-restore for each
// example shoot, saving full and delta snapshots through the shoot's etcd-backup secret, and
// shows a live status table until the purge of the deleted example has completed, a restore
// drill has restored every live shoot's backups and the example EtcdBackupConfig's newest, and
// the example BackupCopyPolicy's last run found its entries wholly in the copy.
package localstack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/functions/setup"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
)

// Cluster names the local cluster in events.
const Cluster = "local"

// scope is what make run serves: the examples' types (an object of another type, a typo
// say, stays untouched).
var scope = gardener.Scope{Types: gardener.ImplementedTypes, Classes: []string{"shoot"}}

// Done is printed once every example is Succeeded and the deleted one is purged.
const Done = "all examples Succeeded, purge completed, every live shoot and etcd backup restored by a drill, the copies complete"

// Options configure Run.
type Options struct {
	// Dir holds the kubeconfig, the logs, JetStream's store, the local buckets and the shoots'
	// etcd data.
	Dir string
	// ExitWhenDone returns once Done is reached, instead of running until ctx ends.
	ExitWhenDone bool
	// NATSNodes, if 1 or 3, runs nats-server as that many processes (3: a cluster, the streams
	// replicated 3 times) instead of embedded.
	NATSNodes int
	// Out receives the status table; Log the components' logs.
	Out io.Writer
	Log *zap.Logger
}

// Run runs the stack until ctx is done (or, with ExitWhenDone, until the examples are done).
func Run(ctx context.Context, o Options) error {
	natsDir := filepath.Join(o.Dir, "nats")
	if err := os.RemoveAll(natsDir); err != nil { // every run starts afresh
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	logFile := func(name string) (*os.File, error) { return os.Create(filepath.Join(o.Dir, name)) }

	fmt.Fprintln(o.Out, "starting kube-apiserver and etcd …")
	kubeLog, err := logFile("kube-apiserver-etcd.log")
	if err != nil {
		return err
	}
	defer kubeLog.Close()
	k, err := stack.StartKube(kubeLog)
	if err != nil {
		return err
	}
	defer func() { _ = k.Stop() }()
	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, k.Kubeconfig, 0o600); err != nil {
		return err
	}

	// NATS as an operator runs it: TLS with client certificates, and each component connected
	// as its own identity with the permissions `housekeeper nats-auth` issues.
	natsURL, issued, stopNATS, err := startNATS(o, natsDir)
	if err != nil {
		return err
	}
	defer stopNATS()
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	connect := func(identity string) (jetstream.JetStream, error) {
		nc, err := natsconn.Connect(issued.Options(natsURL, identity), identity, "housekeeper-"+identity, o.Log.Named(identity))
		if err != nil {
			return nil, err
		}
		conns = append(conns, nc)
		return jetstream.New(nc)
	}

	fmt.Fprintln(o.Out, "starting Azurite …")
	azuriteLog, err := logFile("azurite.log")
	if err != nil {
		return err
	}
	defer azuriteLog.Close()
	az, err := stack.StartAzurite(azuriteLog)
	if err != nil {
		return err
	}
	defer az.Stop()
	s3srv, stopS3, err := startS3(o)
	if err != nil {
		return err
	}
	defer stopS3()
	gcsSrv, stopGCS, err := startGCS(o)
	if err != nil {
		return err
	}
	defer stopGCS()

	js, err := connect(events.IdentityOperator) // the status table's reads
	if err != nil {
		return err
	}
	// The one set-up step, as in every deployment: the streams and the functions' consumers,
	// connected as the setup identity.
	setupJS, err := connect(events.IdentitySetup)
	if err != nil {
		return err
	}
	if err := setup.Run(ctx, setupJS, setup.Options{Replicas: max(o.NATSNodes, 1), Functions: all.Functions,
		Log: o.Log.Named("setup").WithOptions(zap.IncreaseLevel(zap.WarnLevel))}); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	c, err := kube.NewClient(k.Config)
	if err != nil {
		return err
	}

	etcdbr, err := stack.NewEtcdBR(nil)
	if err != nil {
		return err
	}
	s := &session{opts: o, client: c, js: js, connect: connect, azurite: az, s3: s3srv, gcs: gcsSrv, kubeconfig: kubeconfig,
		operatorArgs: strings.Join(issued.Args(natsURL, events.IdentityOperator), " "),
		localRoot:    filepath.Join(o.Dir, "buckets"), etcdRoot: filepath.Join(o.Dir, "etcd"),
		etcdbr: etcdbr, shoots: map[string]*shoot{}}
	if s.providers, err = linkedProviders(s.localRoot); err != nil {
		return err
	}
	for _, dir := range []string{s.localRoot, s.etcdRoot} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	defer s.stopShoots() // before Azurite stops
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	if err := s.startComponents(gctx, g, k); err != nil {
		return err
	}
	g.Go(func() error {
		err := s.play(gctx)
		if err == nil && o.ExitWhenDone {
			cancel()
		}
		return err
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	fmt.Fprintln(o.Out, "stopping …")
	return err
}

// startNATS starts NATS as an operator runs it: TLS with client certificates, and each
// component connected as its own identity with the permissions `housekeeper nats-auth` issues.
// It returns the client URL (every node's, comma-separated).
func startNATS(o Options, dir string) (string, *natsconn.Issued, func(), error) {
	if o.NATSNodes == 0 {
		fmt.Fprintln(o.Out, "starting nats-server with JetStream, TLS and housekeeper's NATS identities …")
		n, issued, err := natsauth.Start(dir, natsconn.FormConfig, cli.Permissions(), true,
			stack.NATSLogger(o.Log.Named("nats-server").WithOptions(zap.IncreaseLevel(zap.WarnLevel))))
		if err != nil {
			return "", nil, nil, err
		}
		return n.URL, issued, n.Stop, nil
	}
	fmt.Fprintf(o.Out, "starting %d nats-server processes with JetStream, TLS and housekeeper's NATS identities (logs: %s/nats-n*.log) …\n", o.NATSNodes, o.Dir)
	var logs []*os.File
	closeLogs := func() {
		for _, f := range logs {
			_ = f.Close()
		}
	}
	c, issued, err := natsauth.StartCluster(dir, o.NATSNodes, natsconn.FormConfig, cli.Permissions(), true, func(name string) io.Writer {
		f, err := os.Create(filepath.Join(o.Dir, "nats-"+name+".log"))
		if err != nil {
			return io.Discard
		}
		logs = append(logs, f)
		return f
	})
	if err != nil {
		closeLogs()
		return "", nil, nil, err
	}
	return c.URL, issued, func() { c.Stop(); closeLogs() }, nil
}

// session is one run of the stack.
type session struct {
	opts   Options
	client client.Client
	js     jetstream.JetStream
	// connect connects to NATS as an identity.
	connect    func(identity string) (jetstream.JetStream, error)
	azurite    *stack.Azurite
	s3         *stack.S3
	gcs        *stack.GCS
	kubeconfig string
	// operatorArgs are the NATS flags of the housekeeper CLI as the operator.
	operatorArgs string
	localRoot    string
	// providers serve the functions and open the shoots' buckets.
	providers objectstore.Registry
	// etcdRoot holds each shoot's etcd data, scratch and credentials directories.
	etcdRoot string
	etcdbr   *stack.EtcdBR
	// exampleEtcdAddress is the host:port of the etcd the EtcdBackupConfig example backs up.
	exampleEtcdAddress string
	// shoots are the example shoots' etcds, by BackupEntry name; play starts them.
	shoots map[string]*shoot
}

// startComponents runs the bridge and the functions in this process, as their binaries would.
func (s *session) startComponents(ctx context.Context, g *errgroup.Group, k *stack.Kube) error {
	log := s.opts.Log
	bridgeJS, err := s.connect(events.IdentityBridge)
	if err != nil {
		return err
	}
	b, err := bridge.New(k.Config, bridgeJS, nil, bridge.Options{Cluster: Cluster, Scope: scope, Logger: log.Named("bridge")})
	if err != nil {
		return err
	}
	g.Go(func() error { return b.Run(ctx) })
	g.Go(func() error { return b.ServeResync(ctx, bridgeJS.Conn()) })
	for _, def := range all.Functions {
		js, err := s.connect(def.Name)
		if err != nil {
			return err
		}
		fn, err := def.Build(ctx, runner.Deps{Config: k.Config, Client: s.client, JetStream: js, Stores: s.providers, Cluster: Cluster, Log: log},
			gardener.ScopeArgs(def, scope.Types...)...)
		if err != nil {
			return err
		}
		w, err := runner.NewWorker(js, fn, prometheus.NewRegistry(), runner.WithLogger(log.Named(fn.Name)),
			runner.WithBackoff(200*time.Millisecond, 5*time.Second))
		if err != nil {
			return err
		}
		g.Go(func() error { return w.Run(ctx) })
	}
	return nil
}

// linkedProviders builds every provider the housekeeper binary links (providers.All, the one
// list of them), configured as make run's functions use them: the local one on root.
func linkedProviders(root string) (objectstore.Registry, error) {
	fs := flag.NewFlagSet("providers", flag.ContinueOnError)
	build := objectstore.BindPlugins(fs, providers.All...)
	if err := fs.Parse([]string{"--local-root", root}); err != nil {
		return nil, err
	}
	return build()
}
