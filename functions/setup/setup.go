// Package setup creates or updates housekeeper's JetStream streams and the durable consumers
// of its functions: the one set-up step every deployment runs before the bridge and the
// functions, which require them and never create them. `housekeeper setup` is its command
// line; harnesses that run the stack in-process (scripts/testenv/pipeline, make run) call Run
// directly, with the same settings as typed options rather than flags.
package setup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// ErrInvalidOptions is what Run returns, wrapped with what is wrong, for options it refuses
// before sending anything to NATS: a caller tells a mistake of its own (the command line: a
// usage error) from a failure of NATS.
var ErrInvalidOptions = errors.New("invalid setup options")

// Options are the one set of settings the streams and the consumers get. A zero MaxAge,
// Replicas, AuditReplicas or Consumer is its default, as `housekeeper setup` has it without
// flags.
type Options struct {
	// MaxAge is how long the stream of record keeps events: the window replay reaches back
	// into (pending schedules are kept until they fire, however long). Zero is
	// events.DefaultMaxAge.
	MaxAge time.Duration
	// Replicas is the replicas of the stream of record and the dead-letter stream: 1 on a
	// single server, 3 on a NATS cluster. Zero is 1.
	Replicas int
	// AuditReplicas is the audit stream's replicas, whatever Replicas is: its reports are
	// what an operator reads, never what a function needs. Zero is 1.
	AuditReplicas int
	// Consumer are the delivery settings written to every consumer, which workers read back
	// from it. Zero is runner.DefaultConsumerSettings(); otherwise every setting must be set.
	Consumer runner.ConsumerSettings
	// Functions are the functions whose consumers to create or update; at least one. A
	// consumer of a function left out is neither created nor removed, so installations that
	// run different functions can share the streams.
	Functions []runner.Definition
	// Log receives what is now in place (a stream, a consumer, with its settings) and the
	// waits for JetStream to answer; nil logs nothing.
	Log *zap.Logger
}

// withDefaults returns o with its zero settings replaced by their defaults, or
// ErrInvalidOptions if a setting is out of range.
func (o Options) withDefaults() (Options, error) {
	if o.MaxAge == 0 {
		o.MaxAge = events.DefaultMaxAge
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AuditReplicas == 0 {
		o.AuditReplicas = 1
	}
	if o.Consumer == (runner.ConsumerSettings{}) {
		o.Consumer = runner.DefaultConsumerSettings()
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.MaxAge < 0 || o.Replicas < 0 || o.AuditReplicas < 0 {
		return o, fmt.Errorf("%w: stream max age %s, replicas %d and audit replicas %d must be positive", ErrInvalidOptions, o.MaxAge, o.Replicas, o.AuditReplicas)
	}
	if err := o.Consumer.Validate(); err != nil {
		return o, fmt.Errorf("%w: consumer settings: %v", ErrInvalidOptions, err)
	}
	if len(o.Functions) == 0 {
		return o, fmt.Errorf("%w: no functions: a setup creates the consumer of at least one", ErrInvalidOptions)
	}
	return o, nil
}

// Run creates or updates the streams and the durable consumer of every function in
// o.Functions over js. Running it again changes only what differs: a stream that already has
// its configuration is not written to, and a consumer is updated in place, keeping its
// position. It first waits until JetStream answers (a cluster that has just started elects
// its meta leader first, and a request before that gets no answer at all), then until the
// cluster places the streams' replicas, for as long as ctx allows.
func Run(ctx context.Context, js jetstream.JetStream, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	if err := natsconn.RequireStreams(ctx, js, o.Log); err != nil && !errors.Is(err, events.ErrNotSetUp) {
		return err
	}
	if err := ensureStreams(ctx, js, o); err != nil {
		return err
	}
	for _, name := range events.StreamNames {
		if err := logStream(ctx, js, name, o.Log); err != nil {
			return err
		}
	}
	for _, def := range o.Functions {
		cons, err := runner.EnsureConsumer(ctx, js, def.Function(nil), o.Consumer)
		if err != nil {
			return err
		}
		cfg := cons.CachedInfo().Config
		o.Log.Info("consumer ready", zap.String("function", def.Name), zap.String("stream", events.RecordStream),
			zap.String("consumer", cfg.Durable), zap.Strings("subjects", cfg.FilterSubjects),
			zap.Duration("ack_wait", cfg.AckWait), zap.Int("max_deliver", cfg.MaxDeliver), zap.Int("max_ack_pending", cfg.MaxAckPending))
	}
	return nil
}

// errCodeNoPeers is nats-server's JSClusterNoPeersErr: no suitable peers for placement.
const errCodeNoPeers jetstream.ErrorCode = 10005

// placementRetry is how long ensureStreams waits before asking again for a placement.
var placementRetry = time.Second

// ensureStreams creates or updates the streams, asking again while the cluster places no
// replicated stream: a cluster that has just elected its meta leader places none until it has
// heard from every peer ("no suitable peers for placement, peer offline"), and one with a
// server down places none of as many replicas as it has servers until that server is back.
func ensureStreams(ctx context.Context, js jetstream.JetStream, o Options) error {
	log := o.Log.With(zap.Int("replicas", o.Replicas), zap.Int("audit_replicas", o.AuditReplicas))
	return untilPlaced(ctx, log, func() error {
		return events.EnsureStreams(ctx, js, events.WithMaxAge(o.MaxAge), events.WithReplicas(o.Replicas), events.WithAuditReplicas(o.AuditReplicas))
	})
}

// untilPlaced runs ensure until it ends with anything but errCodeNoPeers, or ctx ends; it logs
// the wait at once and then every 30 s.
func untilPlaced(ctx context.Context, log *zap.Logger, ensure func() error) error {
	var logged time.Time
	for {
		err := ensure()
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeNoPeers {
			return err
		}
		if time.Since(logged) >= 30*time.Second {
			log.Warn("NATS places no stream of these replicas yet: waiting for its servers (a cluster of fewer servers than replicas never will)", zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(placementRetry):
		}
	}
}

// logStream logs the stream called name as the server now has it, read back rather than as
// asked for, so the log shows what a change left in place.
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
