package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/process"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// functionPlaceholder in --url is replaced by each function's name.
const functionPlaceholder = "{function}"

// runForward delivers functions' events from their durable consumers to the functions served
// over HTTP (Knative), with the pull mode's acks, backoff and dead letters: one process for
// every function, connected as the forwarder's identity, which may consume and do nothing else.
func runForward(ctx context.Context, args []string, nopts natsconn.Options) error {
	fs := newFlags("forward", "--function F[,F...] --url URL [--addr ADDR]", "Deliver the functions' events from their durable JetStream consumers to the functions served\nin http mode (Knative Services), with acks, retries and dead letters, until interrupted.")
	var flags process.Flags
	flags.BindFlags(fs.FlagSet, "address of /healthz, /readyz and /metrics")
	var names config.List
	fs.Var(&names, "function", "functions whose events to forward, comma-separated, of: "+functionNames())
	url := fs.String("url", "", "where a function is served in http mode, "+functionPlaceholder+" replaced by its name (required with several), e.g. http://housekeeper-"+functionPlaceholder+".housekeeper.svc.cluster.local/")
	timeout := fs.Duration("timeout", 5*time.Minute, "longest wait for a function's answer")
	concurrency := fs.Int("concurrency", 4, "events forwarded at once, per function")
	retries := bindRetryFlags(fs.FlagSet, "")
	if err := fs.parse(args); err != nil {
		return err
	}
	if len(names) == 0 || *url == "" {
		return fmt.Errorf("%w: forward needs --url and --function, of: %s", errUsage, functionNames())
	}
	if len(names) > 1 && !strings.Contains(*url, functionPlaceholder) {
		return fmt.Errorf("%w: forward: --url %s must contain %s to name each of %d functions", errUsage, *url, functionPlaceholder, len(names))
	}
	client := &http.Client{Timeout: *timeout}
	fns := make([]runner.Function, len(names))
	for i, name := range names {
		def, ok := all.Lookup(name)
		if !ok {
			return fmt.Errorf("%w: forward: no function %q: one of %s", errUsage, name, functionNames())
		}
		target := strings.ReplaceAll(*url, functionPlaceholder, name)
		fns[i] = def.Function(&runner.Forwarder{URL: target, Client: client})
	}
	proc, err := process.Start(ctx, process.Spec{Name: "housekeeper-forward", Flags: flags,
		NATS: &nopts, Identity: events.IdentityForward, RequireStreams: true})
	if err != nil {
		return err
	}
	defer proc.Close()
	// The ack wait outlasts a slow answer; heartbeats keep it alive meanwhile.
	return runner.ServePull(ctx, fns, runner.Serving{Addr: flags.Addr, JetStream: proc.JetStream, Metrics: proc.Metrics, Log: proc.Log.Named("forward"),
		Worker: append(retries(), runner.WithConcurrency(*concurrency), runner.WithStartup(proc.Startup))})
}
