package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

func functionNames() string { return strings.Join(all.Names(), ", ") }

// runFunction runs one function until ctx is done.
func runFunction(ctx context.Context, args []string, nopts natsconn.Options) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: function needs one of: %s", errUsage, functionNames())
	}
	name := args[0]
	def, ok := all.Lookup(name)
	if !ok {
		return fmt.Errorf("%w: no function %q: one of %s", errUsage, name, functionNames())
	}
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
	cluster := fs.String("cluster", "", "cluster name, the source of the events this function publishes")
	construct := def.Bind(fs)
	if err := config.Parse(fs, args[1:]); err != nil {
		return fmt.Errorf("%w: function %s: %v", errUsage, name, err)
	}
	m, err := runtime.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *cluster == "" && def.Publishing() {
		return fmt.Errorf("%w: function %s needs --cluster (or %s)", errUsage, name, config.EnvName("cluster"))
	}
	if err := kubeOpts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
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
	if m == runtime.ModePull || def.Publishing() {
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
	fn, err := construct.Build(ctx, def, runtime.Deps{Config: cfg, Client: c, JetStream: js, Stores: providers, Cluster: *cluster, Log: log})
	if err != nil {
		return err
	}
	return runtime.Serve(ctx, fn, m, *addr, js, reg, log, runtime.WithConcurrency(*concurrency),
		runtime.WithBackoff(*backoffBase, *backoffMax))
}
