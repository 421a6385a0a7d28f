package runner

import (
	"context"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// In a cluster a Fetch from a just-created consumer can reach a server that has not yet
// learnt of the consumer's interest, which answers "no responders": listing the dead letters and
// replaying a window read every event anyway, whichever server the reader is connected to.
func TestReadingAStreamThroughEveryServerOfACluster(t *testing.T) {
	h := newNATSHarnessOn(t, testenv.WithNATSCluster(3), 3)
	fn := Function{Name: "read", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(context.Context, cloudevents.Event) error { return nil })}
	h.setUp(fn, ConsumerSettings{AckWait: 30 * time.Second, MaxDeliver: 1, MaxAckPending: 1})
	first := h.publish(bucketEvent(t, events.OpCreated, "read", 1))
	msg := nats.NewMsg(events.DeadLetterSubject(fn.Name))
	msg.Data = []byte("{}")
	if _, err := h.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	const rounds = 30
	for _, node := range h.env.NATSCluster.Nodes {
		nc, err := nats.Connect(node.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rounds {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			dls, err := ListDeadLetters(ctx, js, fn.Name)
			if err != nil || len(dls) != 1 {
				t.Fatalf("through %s, listing %d of %d: %d dead letters, %v; want 1", node.Name, i+1, rounds, len(dls), err)
			}
			res, err := Replay(ctx, js, fn.Name, Window{FromSeq: first, UntilSeq: first}, nil)
			if err != nil || res.Redriven != 1 {
				t.Fatalf("through %s, replay %d of %d: %+v, %v; want 1 event", node.Name, i+1, rounds, res, err)
			}
			cancel()
		}
		nc.Close()
	}
}
