package runner

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/events"
)

// A fire reaches a function in HTTP mode through the forwarder unchanged.
func TestFireSurvivesForwarding(t *testing.T) {
	got := make(chan Fire, 1)
	fn := Function{Name: "http-fn", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, _ cloudevents.Event) error {
		f, _ := FireOf(ctx)
		got <- f
		return nil
	})}
	h, err := HTTPHandler(fn, prometheus.NewRegistry(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	f := &Forwarder{URL: srv.URL, Client: srv.Client()}
	want := Fire{At: time.Date(2026, 11, 23, 10, 15, 0, 0, time.UTC), Next: time.Date(2026, 11, 23, 10, 20, 0, 0, time.UTC)}
	if err := f.Handle(WithFire(context.Background(), want), bucketEvent(t, events.OpCreated, "ok", 1)); err != nil {
		t.Fatal(err)
	}
	if f := <-got; !f.At.Equal(want.At) || !f.Next.Equal(want.Next) {
		t.Fatalf("fire %+v, want %+v", f, want)
	}
	if err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, "ok", 1)); err != nil {
		t.Fatal(err)
	}
	if f := <-got; !f.At.IsZero() {
		t.Fatalf("an event without a fire arrived with %+v", f)
	}
}

// The fire comes from the scheduler's headers and the stored time, and a retry's header wins.
func TestFireOfMessage(t *testing.T) {
	stored := time.Date(2026, 11, 23, 10, 15, 0, 4_000_000, time.UTC)
	meta := &jetstream.MsgMetadata{Timestamp: stored}
	h := nats.Header{}
	if _, ok := fireOf(h, meta); ok {
		t.Fatal("a message the bridge published is no fire")
	}
	h.Set("Nats-Scheduler", "housekeeper.schedule.etcdbackup.team_2fmain")
	h.Set("Nats-Schedule-Next", "2026-11-23T10:20:00Z")
	f, ok := fireOf(h, meta)
	if !ok || !f.At.Equal(stored.Truncate(time.Second)) || !f.Next.Equal(time.Date(2026, 11, 23, 10, 20, 0, 0, time.UTC)) {
		t.Fatalf("fire %+v", f)
	}
	h.Set(events.HeaderFiredAt, "2026-11-23T10:10:00Z") // a retry of an earlier fire, stored later
	if f, _ := fireOf(h, meta); !f.At.Equal(time.Date(2026, 11, 23, 10, 10, 0, 0, time.UTC)) {
		t.Fatalf("retry's fire %+v", f)
	}
}
