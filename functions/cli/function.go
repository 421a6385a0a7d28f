package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/purge"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// deps is what a function is built from.
type deps struct {
	config    *rest.Config
	client    client.Client
	js        jetstream.JetStream
	providers objectstore.Registry
	retention entry.Retention
	cluster   string
	log       *zap.Logger
}

// functions are the functions this binary runs, by name. ctx bounds what they start.
var functions = map[string]func(context.Context, deps) (runtime.Function, error){
	bucket.Name: func(_ context.Context, d deps) (runtime.Function, error) {
		return bucket.New(d.client, d.providers, d.log), nil
	},
	entry.Name: func(ctx context.Context, d deps) (runtime.Function, error) {
		metadata, err := kube.StartCache(ctx, d.config, entry.MetadataCacheOptions())
		if err != nil {
			return runtime.Function{}, err
		}
		return entry.New(d.client, metadata, d.js, d.retention, d.cluster, d.log), nil
	},
	purge.Name: func(_ context.Context, d deps) (runtime.Function, error) {
		return purge.New(d.client, d.js, d.providers, d.retention, d.cluster, d.log), nil
	},
	etcdbackup.ScheduleName: func(_ context.Context, d deps) (runtime.Function, error) {
		return etcdbackup.NewSchedule(d.client, d.js, d.cluster, d.log), nil
	},
	etcdbackup.SnapshotName: func(_ context.Context, d deps) (runtime.Function, error) {
		return etcdbackup.NewSnapshot(d.client, d.providers, d.log), nil
	},
}

func functionNames() string {
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// runFunction runs one function until ctx is done.
func runFunction(ctx context.Context, args []string, nopts natsconn.Options) error {
	if len(args) == 0 || functions[args[0]] == nil {
		return fmt.Errorf("%w: function needs one of: %s", errUsage, functionNames())
	}
	name := args[0]
	fs := flag.NewFlagSet("function "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logOpts logging.Options
	logOpts.BindFlags(fs)
	var kubeOpts kube.Options
	kubeOpts.BindFlags(fs, os.Getenv("KUBECONFIG"))
	mode := fs.String("mode", string(runtime.ModePull), "pull (JetStream consumer, for KEDA) or http (CloudEvents over HTTP, for Knative)")
	addr := fs.String("addr", ":8080", "address of /healthz, /readyz, /metrics and, in http mode, the events")
	concurrency := fs.Int("concurrency", 4, "events handled at once (pull mode)")
	backoffBase := fs.Duration("backoff-base", time.Second, "first retry delay; it doubles per delivery (pull mode)")
	backoffMax := fs.Duration("backoff-max", 5*time.Minute, "longest retry delay (pull mode)")
	localRoot := fs.String("local-root", "", "directory of the local provider's buckets; empty: no local provider")
	cluster := fs.String("cluster", "", "cluster name, the source of the events this function publishes (entry, purge)")
	retention := fs.Duration("retention", 0, "how long a deleted BackupEntry's backups are kept before the purge")
	var byPurpose config.List
	fs.Var(&byPurpose, "retention-by-purpose", "retention per shoot purpose, e.g. production=168h,evaluation=24h")
	if err := config.Parse(fs, args[1:]); err != nil {
		return fmt.Errorf("%w: function %s: %v", errUsage, name, err)
	}
	m, err := runtime.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *cluster == "" && name != bucket.Name {
		return fmt.Errorf("%w: function %s needs --cluster (or %s)", errUsage, name, config.EnvName("cluster"))
	}
	if err := kubeOpts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ret := entry.Retention{Default: *retention, ByPurpose: map[string]time.Duration{}}
	for _, kv := range byPurpose {
		purpose, d, ok := strings.Cut(kv, "=")
		dur, err := time.ParseDuration(d)
		if !ok || err != nil {
			return fmt.Errorf("%w: --retention-by-purpose %q: want purpose=duration", errUsage, kv)
		}
		ret.ByPurpose[purpose] = dur
	}

	log, err := logging.New(logOpts)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	logging.RouteLibraries(log)
	cfg, err := kubeOpts.Config()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg = kube.Instrument(cfg, reg)
	c, err := kube.NewClient(cfg)
	if err != nil {
		return err
	}
	providers := objectstore.NewRegistry(azure.New(), s3.New())
	if *localRoot != "" {
		providers = objectstore.NewRegistry(azure.New(), s3.New(), local.New(*localRoot))
	}
	// Pull mode consumes from JetStream; entry and purge also publish to it in either mode. The
	// streams and the consumer are `housekeeper setup`'s: here they must exist.
	var js jetstream.JetStream
	if m == runtime.ModePull || name != bucket.Name {
		nc, err := natsconn.Connect(nopts, name, "housekeeper-"+name, log)
		if err != nil {
			return err
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return err
		}
		if err := natsconn.RequireStreams(ctx, js, log); err != nil {
			return err
		}
	}
	fn, err := functions[name](ctx, deps{config: cfg, client: c, js: js, providers: providers, retention: ret, cluster: *cluster, log: log.Named(name)})
	if err != nil {
		return err
	}
	return runtime.Serve(ctx, fn, m, *addr, js, reg, log, runtime.WithConcurrency(*concurrency),
		runtime.WithBackoff(*backoffBase, *backoffMax))
}
