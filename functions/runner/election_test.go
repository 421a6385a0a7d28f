package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// An ack sent while the consumer's leader is being elected is confirmed by the new leader,
// well within the ack wait: the event is not delivered again, its work not done twice.
func TestAckIsConfirmedAcrossAConsumerLeaderElection(t *testing.T) {
	h := newNATSHarnessOn(t, testenv.WithNATSCluster(3), 3)
	release := make(chan struct{})
	c := newCalls()
	fn := Function{Name: "settled", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		<-release
		return nil
	})}
	settings := ConsumerSettings{AckWait: 30 * time.Second, MaxDeliver: 20, MaxAckPending: 64}
	h.runWith(fn, settings)
	seq := h.publish(bucketEvent(t, events.OpCreated, "settled", 1))
	c.wait(t, 1, 20*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	consumer, err := h.js.Consumer(ctx, events.RecordStream, fn.Name)
	if err != nil {
		t.Fatal(err)
	}
	leader := consumer.CachedInfo().Cluster
	if leader == nil || leader.Leader == "" {
		t.Fatalf("the consumer has no leader: %+v", leader)
	}
	h.env.NATSCluster.Node(leader.Leader).Kill()
	killed := time.Now()
	close(release) // the handler returns: its ack goes out while the consumer has no leader

	testenv.Eventually(t, 25*time.Second, "the ack confirmed by the consumer's new leader", func() (bool, string) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		info, err := h.js.Consumer(qctx, events.RecordStream, fn.Name)
		if err != nil {
			return false, err.Error()
		}
		i := info.CachedInfo()
		return i.AckFloor.Stream >= seq && i.NumAckPending == 0, fmt.Sprintf("leader %v, ack floor %d, %d unacknowledged", i.Cluster, i.AckFloor.Stream, i.NumAckPending)
	})
	t.Logf("acknowledged %s after the consumer leader %s was killed", time.Since(killed).Round(100*time.Millisecond), leader.Leader)
	c.none(t, 2*time.Second) // no second delivery
}
