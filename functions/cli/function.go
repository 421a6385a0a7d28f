package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// deps is what a function is built from.
type deps struct {
	client    client.Client
	providers objectstore.Registry
	log       *zap.Logger
}

// functions are the functions this binary runs, by name.
var functions = map[string]func(deps) runtime.Function{
	bucket.Name: func(d deps) runtime.Function { return bucket.New(d.client, d.providers, d.log) },
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
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty: in-cluster")
	mode := fs.String("mode", string(runtime.ModePull), "pull (JetStream consumer, for KEDA) or http (CloudEvents over HTTP, for Knative)")
	addr := fs.String("addr", ":8080", "address of /healthz, /readyz, /metrics and, in http mode, the events")
	concurrency := fs.Int("concurrency", 4, "events handled at once (pull mode)")
	maxDeliver := fs.Int("max-deliver", 20, "deliveries before a failing event is dead-lettered (pull mode)")
	localRoot := fs.String("local-root", "", "directory of the local provider's buckets; empty: no local provider")
	streamMaxAge := fs.Duration("stream-max-age", events.DefaultMaxAge, "how long the stream of record keeps events")
	streamReplicas := fs.Int("stream-replicas", 1, "stream replicas")
	if err := config.Parse(fs, args[1:]); err != nil {
		return fmt.Errorf("%w: function %s: %v", errUsage, name, err)
	}
	m, err := runtime.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	log, err := logging.New(logOpts)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	logging.RouteLibraries(log)
	cfg, err := kube.Config(*kubeconfig)
	if err != nil {
		return err
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		return err
	}
	providers := objectstore.NewRegistry(azure.New())
	if *localRoot != "" {
		providers = objectstore.NewRegistry(azure.New(), local.New(*localRoot))
	}
	fn := functions[name](deps{client: c, providers: providers, log: log.Named(name)})

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var js jetstream.JetStream
	if m == runtime.ModePull {
		nc, err := natsconn.Connect(nopts, "housekeeper-"+name, log)
		if err != nil {
			return err
		}
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return err
		}
		if err := natsconn.EnsureStreams(ctx, js, log, events.WithMaxAge(*streamMaxAge), events.WithReplicas(*streamReplicas)); err != nil {
			return err
		}
	}
	return runtime.Serve(ctx, fn, m, *addr, js, reg, log, runtime.WithConcurrency(*concurrency), runtime.WithMaxDeliver(*maxDeliver))
}
