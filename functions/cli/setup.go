package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// runSetup creates or updates the streams and the durable consumer of every function (or of
// those of --functions), with one set of settings. It is the only thing that does: the bridge
// and the functions require them and never create them, so it runs first (a Kubernetes Job, a
// compose service, the first step of every test harness). Running it again changes only what
// differs; the consumer of a function left out is neither created nor removed.
func runSetup(ctx context.Context, args []string, connect connector) error {
	fs := newFlags("setup", "[--functions F,...] [--stream-replicas N] [--stream-max-age D] [--ack-wait D] ...", "Create or update the streams and every function's durable consumer (those of --functions). Run it\nbefore the bridge and the functions, and again after a change; it changes only what differs.")
	functions := config.List(all.Names())
	fs.Var(&functions, "functions", "the functions whose consumers to create or update, comma-separated, of: "+functionNames()+"; a consumer of another is left as it is")
	var logOpts logging.Options
	logOpts.BindFlags(fs.FlagSet)
	maxAge := fs.Duration("stream-max-age", events.DefaultMaxAge, "how long the stream of record keeps events: the window replay reaches back into (pending schedules are kept until they fire, however long)")
	replicas := fs.Int("stream-replicas", 1, "stream replicas (3 on a NATS cluster)")
	cs := runner.DefaultConsumerSettings()
	fs.DurationVar(&cs.AckWait, "ack-wait", cs.AckWait, "how long JetStream waits for a function's ack before redelivering (running handlers renew it)")
	fs.IntVar(&cs.MaxDeliver, "max-deliver", cs.MaxDeliver, "deliveries before a failing event is dead-lettered")
	fs.IntVar(&cs.MaxAckPending, "max-ack-pending", cs.MaxAckPending, "events in flight at once per function, across its replicas")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *maxAge <= 0 || *replicas < 1 {
		return fmt.Errorf("%w: setup: --stream-max-age %s and --stream-replicas %d must be positive", errUsage, *maxAge, *replicas)
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
	// Wait until JetStream answers: a cluster that has just started elects its meta leader
	// first, and a request before that gets no answer at all.
	if err := natsconn.RequireStreams(ctx, js, log); err != nil && !errors.Is(err, events.ErrNotSetUp) {
		return err
	}
	if err := events.EnsureStreams(ctx, js, events.WithMaxAge(*maxAge), events.WithReplicas(*replicas)); err != nil {
		return err
	}
	for _, name := range []string{events.RecordStream, events.DeadLetterStream} {
		if err := logStream(ctx, js, name, log); err != nil {
			return err
		}
	}
	for _, def := range defs {
		name := def.Name
		cons, err := runner.EnsureConsumer(ctx, js, def.Function(nil), cs)
		if err != nil {
			return err
		}
		cfg := cons.CachedInfo().Config
		log.Info("consumer ready", zap.String("function", name), zap.String("stream", events.RecordStream),
			zap.String("consumer", cfg.Durable), zap.Strings("subjects", cfg.FilterSubjects),
			zap.Duration("ack_wait", cfg.AckWait), zap.Int("max_deliver", cfg.MaxDeliver), zap.Int("max_ack_pending", cfg.MaxAckPending))
	}
	if left := slices.DeleteFunc(all.Names(), func(name string) bool { return slices.Contains(functions, name) }); len(left) > 0 {
		log.Info("no consumer set up for these functions (not in --functions); one that exists is left as it is", zap.Strings("functions", left))
	}
	log.Info("set up: the bridge and the functions can start", zap.String("url", nc.ConnectedUrlRedacted()))
	return nil
}

func logStream(ctx context.Context, js jetstream.JetStream, name string, log *zap.Logger) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("reading back stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	log.Info("stream ready", zap.String("stream", name), zap.Strings("subjects", cfg.Subjects),
		zap.Duration("max_age", cfg.MaxAge), zap.Int("replicas", cfg.Replicas), zap.Uint64("messages", s.CachedInfo().State.Msgs))
	return nil
}
