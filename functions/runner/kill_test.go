package runner

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/housekeeper-dev/housekeeper/events"
)

const helperNATSEnv = "HOUSEKEEPER_TEST_HELPER_NATS"

// killable is the function both workers run; its consumer redelivers after 2 s.
func killable(h Handler) Function {
	return Function{Name: "killable", Types: []string{events.TypeBucketCreated}, Handler: h}
}

var killableSettings = ConsumerSettings{AckWait: 2 * time.Second, MaxDeliver: 20, MaxAckPending: 64}

// A worker process killed with SIGKILL in the middle of a handler never acks; JetStream
// redelivers the event to another worker once the ack wait passes.
func TestKilledWorkerEventIsRedeliveredToAnotherWorker(t *testing.T) {
	h := newNATSHarness(t)
	h.setUp(killable(nil), killableSettings)
	started, err := h.nc.SubscribeSync("test.handler.started")
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$", "-test.v")
	child.Env = append(os.Environ(), helperNATSEnv+"="+h.env.NATS.URL)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	e := bucketEvent(t, events.OpCreated, "killed-midway", 1)
	h.publish(e)
	if _, err := started.NextMsg(20 * time.Second); err != nil {
		t.Fatalf("the child worker never started handling: %v", err)
	}
	if err := child.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	c := newCalls()
	h.runWith(killable(HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		return nil
	})), killableSettings)
	c.wait(t, 1, 15*time.Second)
	if c.ids[0] != e.ID() {
		t.Errorf("second worker got %s, want the killed worker's event %s", c.ids[0], e.ID())
	}
}

// TestHelperWorkerProcess is the worker that TestKilledWorkerEventIsRedeliveredToAnotherWorker
// runs as a child process and kills; run on its own it has nothing to do.
func TestHelperWorkerProcess(t *testing.T) {
	url := os.Getenv(helperNATSEnv)
	if url == "" {
		t.Skip("child process of TestKilledWorkerEventIsRedeliveredToAnotherWorker")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	w, err := NewWorker(js, killable(HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		_ = nc.Publish("test.handler.started", []byte(e.ID()))
		_ = nc.Flush()
		<-ctx.Done() // hang until killed
		return ctx.Err()
	})), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Run(context.Background())
}
