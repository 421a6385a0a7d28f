package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

func nop(context.Context, cloudevents.Event) error { return nil }

// A worker never creates its consumer: without the setup it stops at once and says what is
// missing and what to run.
func TestWorkerFailsWithoutSetUp(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fn := Function{Name: "lonely", Types: []string{events.TypeBucketCreated, events.TypeBucketDeleting}, Handler: HandlerFunc(nop)}
	run := func() error {
		w, err := NewWorker(js, fn, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return w.Run(ctx)
	}
	wantNotSetUp := func(what string, err error, says string) {
		t.Helper()
		if !errors.Is(err, events.ErrNotSetUp) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "run `housekeeper setup`") {
			t.Errorf("%s: %v, want ErrNotSetUp saying %q", what, err, says)
		}
	}

	wantNotSetUp("no streams", run(), "stream HOUSEKEEPER does not exist")
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	wantNotSetUp("no consumer", run(), "consumer lonely on stream HOUSEKEEPER does not exist")
	if _, err := js.Consumer(ctx, events.RecordStream, fn.Name); err == nil {
		t.Fatal("the worker created its consumer")
	}

	// A consumer set up for an older version of the function, which took fewer types.
	older := Function{Name: fn.Name, Types: fn.Types[:1]}
	if _, err := EnsureConsumer(ctx, js, older, DefaultConsumerSettings()); err != nil {
		t.Fatal(err)
	}
	wantNotSetUp("outdated consumer", run(), "consumer lonely on stream HOUSEKEEPER reads")

	// After the setup it runs until stopped.
	if _, err := EnsureConsumer(ctx, js, fn, DefaultConsumerSettings()); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	w, err := NewWorker(js, fn, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(stopped); err != nil {
		t.Errorf("after the setup: %v", err)
	}
}

// EnsureConsumer is idempotent, updates a changed setting in place, and refuses settings that
// cannot work.
func TestEnsureConsumer(t *testing.T) {
	h := newNATSHarness(t)
	ctx := context.Background()
	fn := Function{Name: "steady", Types: []string{events.TypeEntryDeleting}}
	s := DefaultConsumerSettings()
	cons, err := EnsureConsumer(ctx, h.js, fn, s)
	if err != nil {
		t.Fatal(err)
	}
	first := cons.CachedInfo()
	cfg := first.Config
	if cfg.Durable != "steady" || !slices.Equal(cfg.FilterSubjects, fn.FilterSubjects()) || cfg.AckWait != s.AckWait ||
		cfg.MaxDeliver != s.MaxDeliver || cfg.MaxAckPending != s.MaxAckPending {
		t.Errorf("consumer as the server has it: %+v", cfg)
	}

	if _, err := EnsureConsumer(ctx, h.js, fn, s); err != nil {
		t.Fatalf("again: %v", err)
	}
	s.MaxDeliver = 7
	cons, err = EnsureConsumer(ctx, h.js, fn, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo(); got.Config.MaxDeliver != 7 || !got.Created.Equal(first.Created) {
		t.Errorf("after changing max deliver: %d, created %s → %s", got.Config.MaxDeliver, first.Created, got.Created)
	}

	for _, bad := range []ConsumerSettings{{MaxDeliver: 1, MaxAckPending: 1}, {AckWait: time.Second, MaxAckPending: 1}, {AckWait: time.Second, MaxDeliver: 1}} {
		if _, err := EnsureConsumer(ctx, h.js, fn, bad); err == nil {
			t.Errorf("settings %+v accepted", bad)
		}
	}
	if _, err := EnsureConsumer(ctx, h.js, Function{Name: "typeless"}, s); err == nil {
		t.Error("a function without types got a consumer")
	}
}
