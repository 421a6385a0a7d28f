package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// While its consumer is gone (deleted, or without a leader in a cluster), a worker backs off:
// a few fetches and log lines a second at most, not a hot loop. When the consumer is back it
// fetches again and handles what is published.
func TestFetchBacksOffWhileTheConsumerIsGone(t *testing.T) {
	h := newNATSHarness(t)
	core, logs := observer.New(zapcore.InfoLevel)
	handled := make(chan string, 10)
	fn := Function{Name: "patient", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(_ context.Context, e cloudevents.Event) error {
		handled <- e.ID()
		return nil
	})}
	h.run(fn, WithLogger(zap.New(core)))
	testenv.Eventually(t, 10*time.Second, "the worker consuming", func() (bool, string) { return logs.FilterMessage("consuming").Len() > 0, "" })

	ctx := context.Background()
	if err := h.js.DeleteConsumer(ctx, events.RecordStream, fn.Name); err != nil {
		t.Fatal(err)
	}
	const outage = 4 * time.Second
	time.Sleep(outage)
	failures := logs.FilterFieldKey("failures").Len()
	warnings := 0
	for _, e := range logs.All() {
		if e.Level == zapcore.WarnLevel && strings.Contains(e.Message, "fetch") {
			warnings++
		}
	}
	if warnings == 0 {
		t.Fatalf("no fetch warning in %s without a consumer: the test observed nothing", outage)
	}
	if warnings > 8 {
		t.Errorf("%d fetch warnings in %s without a consumer, want a few (back-off)", warnings, outage)
	}
	t.Logf("%d fetch warnings (%d with a failure count) in %s without a consumer", warnings, failures, outage)

	h.setUp(fn, DefaultConsumerSettings())
	e := bucketEvent(t, events.OpCreated, "after-outage", 1)
	h.publish(e)
	want := e.ID()
	select {
	case id := <-handled:
		if id != want {
			t.Errorf("handled %s, want %s", id, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not handle an event after its consumer came back")
	}
}
