package setup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/functions/setup"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// Options out of range are refused before anything is sent: js is never touched.
func TestRunRefusesInvalidOptions(t *testing.T) {
	fns := []runner.Definition{bucket.Definition}
	for name, o := range map[string]setup.Options{
		"negative max age":       {MaxAge: -time.Second, Functions: fns},
		"negative replicas":      {Replicas: -1, Functions: fns},
		"partial consumer":       {Consumer: runner.ConsumerSettings{MaxDeliver: 5}, Functions: fns},
		"zero ack wait":          {Consumer: runner.ConsumerSettings{MaxDeliver: 5, MaxAckPending: 1}, Functions: fns},
		"no functions":           {},
		"no functions, settings": {MaxAge: time.Hour, Replicas: 1},
	} {
		if err := setup.Run(context.Background(), nil, o); !errors.Is(err, setup.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
}

// Zero settings are the defaults `housekeeper setup` has without flags; only the consumers of
// the functions given are created.
func TestRunWithDefaults(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := setup.Run(ctx, js, setup.Options{Functions: []runner.Definition{bucket.Definition}}); err != nil {
		t.Fatal(err)
	}
	record, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := record.CachedInfo().Config; cfg.MaxAge != events.DefaultMaxAge || cfg.Replicas != 1 {
		t.Errorf("stream of record: max age %s, replicas %d; want %s, 1", cfg.MaxAge, cfg.Replicas, events.DefaultMaxAge)
	}
	cons, err := js.Consumer(ctx, events.RecordStream, bucket.Definition.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := runner.DefaultConsumerSettings()
	if cfg := cons.CachedInfo().Config; cfg.AckWait != want.AckWait || cfg.MaxDeliver != want.MaxDeliver || cfg.MaxAckPending != want.MaxAckPending {
		t.Errorf("consumer %s: ack wait %s, max deliver %d, max ack pending %d; want %+v", cfg.Durable, cfg.AckWait, cfg.MaxDeliver, cfg.MaxAckPending, want)
	}
	if _, err := js.Consumer(ctx, events.RecordStream, entry.Definition.Name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer of %s, not among the functions: %v, want none", entry.Definition.Name, err)
	}
}
