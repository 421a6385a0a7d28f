package natsconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// RequireStreams ends at once when the streams are missing (only the setup creates them),
// returns when they exist, and waits, without giving up, while NATS does not answer.
func TestRequireStreams(t *testing.T) {
	log := zaptest.NewLogger(t)
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsconn.RequireStreams(ctx, js, log); !errors.Is(err, events.ErrNotSetUp) {
		t.Errorf("no streams: %v, want ErrNotSetUp", err)
	}
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := natsconn.RequireStreams(ctx, js, log); err != nil {
		t.Errorf("after the setup: %v", err)
	}

	// Nothing listens here: it keeps trying until told to stop.
	nc, err := natsconn.Connect(natsconn.Options{URL: "nats://127.0.0.1:1"}, "test", "test", log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	unreachable, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	if err := natsconn.RequireStreams(short, unreachable, log); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NATS unreachable: %v, want to wait until the context ends", err)
	}
}
