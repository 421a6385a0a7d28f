package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/process"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// runForward delivers a function's events from its durable consumer to the function served
// over HTTP (Knative), with the pull mode's acks, backoff and dead letters.
func runForward(ctx context.Context, args []string, nopts natsconn.Options) error {
	fs := newFlags("forward", "--function F --url URL [--addr ADDR]", "Deliver F's events from its durable JetStream consumer to F served in http mode (a Knative\nService), with acks, retries and dead letters, until interrupted.")
	var flags process.Flags
	flags.BindFlags(fs.FlagSet, "address of /healthz, /readyz and /metrics")
	name := fs.String("function", "", "function whose events to forward: "+functionNames())
	url := fs.String("url", "", "where the function is served in http mode, e.g. http://bucket.housekeeper.svc.cluster.local")
	timeout := fs.Duration("timeout", 5*time.Minute, "longest wait for the function's answer")
	concurrency := fs.Int("concurrency", 4, "events forwarded at once")
	backoffBase := fs.Duration("backoff-base", time.Second, "first retry delay; it doubles per delivery")
	backoffMax := fs.Duration("backoff-max", 5*time.Minute, "longest retry delay")
	if err := fs.parse(args); err != nil {
		return err
	}
	def, ok := all.Lookup(*name)
	if !ok || *url == "" {
		return fmt.Errorf("%w: forward needs --url and --function, one of: %s", errUsage, functionNames())
	}
	// The forwarder is its function's consumer, so it connects as the function.
	proc, err := process.Start(ctx, process.Spec{Name: "housekeeper-forward-" + *name, Flags: flags,
		NATS: &nopts, Identity: *name, RequireStreams: true})
	if err != nil {
		return err
	}
	defer proc.Close()
	fn := runtime.Function{Name: *name, Types: def.Types, Handler: &runtime.Forwarder{URL: *url, Client: &http.Client{Timeout: *timeout}}}
	// The ack wait outlasts a slow answer; heartbeats keep it alive meanwhile.
	return runtime.Serve(ctx, fn, runtime.ModePull, flags.Addr, proc.JetStream, proc.Metrics, proc.Log.Named("forward"),
		runtime.WithConcurrency(*concurrency), runtime.WithBackoff(*backoffBase, *backoffMax))
}
