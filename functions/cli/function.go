package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/process"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

func functionNames() string { return strings.Join(all.Names(), ", ") }

// runFunction runs one function until ctx is done.
func runFunction(ctx context.Context, args []string, nopts natsconn.Options, plugins []objectstore.Plugin) error {
	if len(args) == 0 || isHelp(args[0]) {
		return fmt.Errorf("%w: function needs one of: %s (housekeeper function NAME --help)", errUsage, functionNames())
	}
	name := args[0]
	def, ok := all.Lookup(name)
	if !ok {
		return fmt.Errorf("%w: no function %q: one of %s", errUsage, name, functionNames())
	}
	fs := newFlags("function "+name, "[flags]", fmt.Sprintf("Run the %s function (events %s) until interrupted.", name, strings.Join(def.Types, ", ")))
	var flags process.Flags
	flags.BindFlags(fs.FlagSet, "address of /healthz, /readyz, /metrics and, in http mode, the events")
	var kubeOpts kube.Options
	kubeOpts.BindFlags(fs.FlagSet, os.Getenv("KUBECONFIG"))
	mode := fs.String("mode", string(runner.ModePull), "pull (JetStream consumer, for KEDA) or http (CloudEvents over HTTP, for Knative)")
	concurrency := fs.Int("concurrency", 4, "events handled at once (pull mode)")
	retries := bindRetryFlags(fs.FlagSet, " (pull mode)")
	cluster := fs.String("cluster", "", "cluster name, the source of the events this function publishes")
	stores := objectstore.BindPlugins(fs.FlagSet, plugins...)
	construct := def.Bind(fs.FlagSet)
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	m, err := runner.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if def.Publishing() || *cluster != "" {
		if err := config.ValidateCluster(*cluster); err != nil {
			return fmt.Errorf("%w: function %s: %v", errUsage, name, err)
		}
	}
	if err := kubeOpts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	providers, err := stores()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	spec := process.Spec{Name: "housekeeper-" + name, Flags: flags, Kube: &kubeOpts}
	// Pull mode consumes from JetStream; a function that publishes needs it in either mode. The
	// streams and the consumer are `housekeeper setup`'s: here they must exist.
	if m == runner.ModePull || def.Publishing() {
		spec.NATS, spec.Identity, spec.RequireStreams = &nopts, name, true
	}
	proc, err := process.Start(ctx, spec)
	if err != nil {
		return err
	}
	defer proc.Close()
	fn, err := construct.Build(ctx, def, runner.Deps{Config: proc.KubeConfig, Client: proc.Client, JetStream: proc.JetStream,
		Stores: providers, Cluster: *cluster, Log: proc.Log, Metrics: proc.Metrics, FirstEventSettled: proc.Startup.Settled()})
	if err != nil {
		return err
	}
	proc.Startup.Mark("function_built")
	return runner.Serve(ctx, fn, runner.Serving{Mode: m, Addr: flags.Addr, JetStream: proc.JetStream, Metrics: proc.Metrics, Log: proc.Log,
		Worker: append(retries(), runner.WithConcurrency(*concurrency), runner.WithStartup(proc.Startup))})
}

// bindRetryFlags binds the retry flags of a worker (the function's pull mode, the forwarder) and
// returns their options once parsed.
func bindRetryFlags(fs *flag.FlagSet, mode string) func() []runner.WorkerOption {
	base := fs.Duration("backoff-base", time.Second, "first retry delay; it doubles per delivery"+mode)
	longest := fs.Duration("backoff-max", runner.DefaultBackoffMax, "longest retry delay: work waiting for a dependency resumes within it of its return"+mode)
	budget := fs.Duration("retry-budget", runner.DefaultRetryBudget, "how long an event failing for a cause of its own (not a dependency's outage) is retried before it is dead-lettered"+mode)
	return func() []runner.WorkerOption {
		return []runner.WorkerOption{runner.WithBackoff(*base, *longest), runner.WithRetryBudget(*budget)}
	}
}
