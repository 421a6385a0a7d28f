package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// runForward delivers a function's events from its durable consumer to the function served
// over HTTP (Knative), with the pull mode's acks, backoff and dead letters.
func runForward(ctx context.Context, args []string, nopts natsconn.Options) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logOpts logging.Options
	logOpts.BindFlags(fs)
	name := fs.String("function", "", "function whose events to forward: "+functionNames())
	url := fs.String("url", "", "where the function is served in http mode, e.g. http://bucket.housekeeper.svc.cluster.local")
	timeout := fs.Duration("timeout", 5*time.Minute, "longest wait for the function's answer")
	addr := fs.String("addr", ":8080", "address of /healthz, /readyz and /metrics")
	concurrency := fs.Int("concurrency", 4, "events forwarded at once")
	backoffBase := fs.Duration("backoff-base", time.Second, "first retry delay; it doubles per delivery")
	backoffMax := fs.Duration("backoff-max", 5*time.Minute, "longest retry delay")
	if err := config.Parse(fs, args); err != nil {
		return fmt.Errorf("%w: forward: %v", errUsage, err)
	}
	def, ok := all.Lookup(*name)
	if !ok || *url == "" {
		return fmt.Errorf("%w: forward needs --url and --function, one of: %s", errUsage, functionNames())
	}
	log, err := logging.New(logOpts)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	nc, err := natsconn.Connect(nopts, *name, "housekeeper-forward-"+*name, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := natsconn.RequireStreams(ctx, js, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fn := runtime.Function{Name: *name, Types: def.Types, Handler: &runtime.Forwarder{URL: *url, Client: &http.Client{Timeout: *timeout}}}
	// The ack wait outlasts a slow answer; heartbeats keep it alive meanwhile.
	return runtime.Serve(ctx, fn, runtime.ModePull, *addr, js, reg, log.Named("forward"),
		runtime.WithConcurrency(*concurrency), runtime.WithBackoff(*backoffBase, *backoffMax))
}
