package cli

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/functions/setup"
)

// runSetup is `housekeeper setup`: its flags, checked before anything connects (a mistake is
// a usage error), become setup.Options for the functions of --functions, and setup.Run does the
// work as the setup identity. It runs first (a Kubernetes Job, a compose service), since the
// bridge and the functions require the streams and consumers and never create them.
func runSetup(ctx context.Context, args []string, connect connector) error {
	fs := newFlags("setup", "[--functions F,...] [--stream-replicas N] [--audit-replicas N] [--stream-max-age D] [--ack-wait D] ...", "Create or update the streams and every function's durable consumer (those of --functions). Run it\nbefore the bridge and the functions, and again after a change; it changes only what differs.")
	functions := config.List(all.Names())
	fs.Var(&functions, "functions", "the functions whose consumers to create or update, comma-separated, of: "+functionNames()+"; a consumer of another is left as it is")
	var logOpts logging.Options
	logOpts.BindFlags(fs.FlagSet)
	maxAge := fs.Duration("stream-max-age", events.DefaultMaxAge, "how long the stream of record keeps events: the window replay reaches back into (pending schedules are kept until they fire, however long)")
	replicas := fs.Int("stream-replicas", 1, "replicas of the stream of record and the dead letters (3 on a NATS cluster)")
	auditReplicas := fs.Int("audit-replicas", 1, "replicas of the audit stream, the functions' reports (purges scheduled, completed, failed, verified): 1 keeps them on one server, 3 as safe as the events")
	cs := runner.DefaultConsumerSettings()
	fs.DurationVar(&cs.AckWait, "ack-wait", cs.AckWait, "how long JetStream waits for a function's ack before redelivering (running handlers renew it)")
	fs.IntVar(&cs.MaxDeliver, "max-deliver", cs.MaxDeliver, "deliveries of one event without an answer (its worker crashed or hung past the ack wait) before it is dead-lettered")
	fs.IntVar(&cs.MaxAckPending, "max-ack-pending", cs.MaxAckPending, "events in flight at once per function, across its replicas")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *maxAge <= 0 || *replicas < 1 || *auditReplicas < 1 {
		return fmt.Errorf("%w: setup: --stream-max-age %s, --stream-replicas %d and --audit-replicas %d must be positive", errUsage, *maxAge, *replicas, *auditReplicas)
	}
	if err := cs.Validate(); err != nil {
		return fmt.Errorf("%w: setup: --ack-wait, --max-deliver, --max-ack-pending: %v", errUsage, err)
	}
	if len(functions) == 0 {
		return fmt.Errorf("%w: setup: --functions is empty: give one or more of %s", errUsage, functionNames())
	}
	defs := make([]runner.Definition, 0, len(functions))
	for _, name := range functions {
		def, ok := all.Lookup(name)
		if !ok {
			return fmt.Errorf("%w: setup: --functions: no function %q: one of %s", errUsage, name, functionNames())
		}
		if !slices.ContainsFunc(defs, func(d runner.Definition) bool { return d.Name == name }) {
			defs = append(defs, def)
		}
	}
	log, err := logging.New(logOpts)
	if err != nil {
		return fmt.Errorf("%w: setup: %v", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	log = log.Named("setup")

	nc, js, err := connect(events.IdentitySetup)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := setup.Run(ctx, js, setup.Options{MaxAge: *maxAge, Replicas: *replicas, AuditReplicas: *auditReplicas, Consumer: cs, Functions: defs, Log: log}); err != nil {
		return err
	}
	if left := slices.DeleteFunc(all.Names(), func(name string) bool { return slices.Contains(functions, name) }); len(left) > 0 {
		log.Info("no consumer set up for these functions (not in --functions); one that exists is left as it is", zap.Strings("functions", left))
	}
	log.Info("set up: the bridge and the functions can start", zap.String("url", nc.ConnectedUrlRedacted()))
	return nil
}
