package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
)

// ConsumerSettings are the delivery settings of a function's durable consumer. `housekeeper
// setup` writes them to the consumer and workers read them back from it, so every replica of a
// function, in either mode, delivers the same way.
type ConsumerSettings struct {
	// AckWait is how long JetStream waits for an ack before redelivering. Running handlers
	// send in-progress heartbeats every third of it, so only a dead worker's event comes back.
	AckWait time.Duration
	// MaxDeliver is the number of deliveries after which a still-failing event is dead-lettered.
	MaxDeliver int
	// MaxAckPending bounds the events in flight at once across every replica of the function.
	MaxAckPending int
}

// DefaultConsumerSettings are the settings `housekeeper setup` uses unless told otherwise.
func DefaultConsumerSettings() ConsumerSettings {
	// 256 in flight: the most KEDA runs of a function (4) times a generous concurrency.
	return ConsumerSettings{AckWait: 30 * time.Second, MaxDeliver: 20, MaxAckPending: 256}
}

// Validate says what is wrong with the settings.
func (s ConsumerSettings) Validate() error {
	if s.AckWait <= 0 || s.MaxDeliver < 1 || s.MaxAckPending < 1 {
		return fmt.Errorf("ack wait %s, max deliver %d, max ack pending %d: all must be positive", s.AckWait, s.MaxDeliver, s.MaxAckPending)
	}
	return nil
}

// ConsumerConfig is the durable consumer of fn on the stream of record.
func ConsumerConfig(fn Function, s ConsumerSettings) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        fn.Name,
		Description:    "housekeeper function " + fn.Name,
		FilterSubjects: fn.FilterSubjects(),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        s.AckWait,
		MaxDeliver:     s.MaxDeliver,
		MaxAckPending:  s.MaxAckPending,
	}
}

// EnsureConsumer creates fn's durable consumer or updates it to s and fn's subjects: the
// consumer part of `housekeeper setup`. Only fn's name and types matter here.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, fn Function, s ConsumerSettings) (jetstream.Consumer, error) {
	if err := fn.validateTypes(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("function %s: %w", fn.Name, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, events.RecordStream, ConsumerConfig(fn, s))
	if err != nil {
		return nil, fmt.Errorf("function %s: creating or updating consumer %s on stream %s: %w", fn.Name, fn.Name, events.RecordStream, err)
	}
	return cons, nil
}

// bindConsumer returns fn's existing durable consumer. A missing stream or consumer, or one
// that no longer reads fn's subjects (a function that takes a new event type), is
// events.ErrNotSetUp: a function never creates or changes its consumer itself.
func bindConsumer(ctx context.Context, js jetstream.JetStream, fn Function) (jetstream.Consumer, error) {
	cons, err := js.Consumer(ctx, events.RecordStream, fn.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("function %s: stream %s does not exist: %w", fn.Name, events.RecordStream, events.ErrNotSetUp)
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("function %s: consumer %s on stream %s does not exist: %w", fn.Name, fn.Name, events.RecordStream, events.ErrNotSetUp)
	case err != nil:
		return nil, fmt.Errorf("function %s: looking up consumer %s on stream %s: %w", fn.Name, fn.Name, events.RecordStream, err)
	}
	have, want := slices.Sorted(slices.Values(cons.CachedInfo().Config.FilterSubjects)), slices.Sorted(slices.Values(fn.FilterSubjects()))
	if !slices.Equal(have, want) {
		return nil, fmt.Errorf("function %s: consumer %s on stream %s reads %v, the function takes %v: %w",
			fn.Name, fn.Name, events.RecordStream, have, want, events.ErrNotSetUp)
	}
	return cons, nil
}
