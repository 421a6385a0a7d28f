package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// publishGroup is the most events that go out together: the dispatchers, each holding one
// event at the pacer.
const publishGroup = 64

// Publisher publishes a message without waiting for JetStream's ack; the future resolves
// with the ack or an error (jetstream.JetStream is one).
type Publisher interface {
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

// inFlight is a published event whose ack has not been seen yet.
type inFlight struct {
	key    string
	event  cloudevents.Event
	future jetstream.PubAckFuture
	sent   time.Time
}

// dispatch takes events from the queue and publishes them with at most MaxInFlight acks
// outstanding, handing each to awaitAcks in publish order. Waiting for every ack before the
// next publish (one round trip per event and worker) was the bridge's bottleneck. A key stays
// taken from the queue until its ack is in, so an object has at most one event in flight and
// its events reach the stream in order. Events are published in groups (pacer). Once ctx is
// done, what is left in the queue is put back unpublished.
func (b *Bridge) dispatch(ctx context.Context, pace *pacer, acks chan<- inFlight) {
	for {
		key, e, ok := b.queue.next()
		if !ok {
			return
		}
		if ctx.Err() != nil {
			b.finish(key, e, ctx.Err())
			continue
		}
		msg, err := events.Encode(e)
		if err != nil {
			// Our own event failed our own contract: a bug, not a transient fault. Retrying
			// cannot help; say loudly what it was.
			b.log.Error("dropping event that does not encode", zap.String("type", e.Type()),
				zap.String("subject", e.Subject()), zap.Error(err))
			b.finish(key, e, nil)
			continue
		}
		pace.wait(ctx)
		sent := time.Now()
		future, err := b.publisher.PublishMsgAsync(msg)
		if err != nil {
			b.finish(key, e, fmt.Errorf("publishing %s: %w", msg.Subject, err))
			continue
		}
		acks <- inFlight{key: key, event: e, future: future, sent: sent} // blocks while the window is full
	}
}

// awaitAcks waits for the acks of the published events, oldest first (JetStream acks in
// order), each for at most PublishTimeout from its publish or until ctx is done, and finishes
// their keys.
func (b *Bridge) awaitAcks(ctx context.Context, acks <-chan inFlight) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for p := range acks {
		timer.Reset(b.opts.PublishTimeout - time.Since(p.sent))
		select {
		case ack := <-p.future.Ok():
			b.metrics.latency.Observe(time.Since(p.sent).Seconds())
			b.metrics.published.WithLabelValues(p.event.Type()).Inc()
			if ack.Duplicate {
				b.metrics.duplicates.Inc()
			}
			b.announced.acknowledged(p.key, p.event)
			b.finish(p.key, p.event, nil)
		case err := <-p.future.Err():
			b.finish(p.key, p.event, fmt.Errorf("publishing %s: %w", p.event.Subject(), err))
		case <-ctx.Done():
			b.finish(p.key, p.event, ctx.Err())
		case <-timer.C:
			// A late ack is harmless: the retry carries the same Nats-Msg-Id.
			b.finish(p.key, p.event, fmt.Errorf("publishing %s: no ack within %s", p.event.Subject(), b.opts.PublishTimeout))
		}
	}
}

// finish ends key's turn; a failed event goes back to the queue and is retried with backoff.
func (b *Bridge) finish(key string, e cloudevents.Event, err error) {
	if err != nil {
		b.metrics.publishErrors.Inc()
		b.log.Debug("publish failed, will retry", zap.String("type", e.Type()), zap.String("name", e.Subject()), zap.Error(err))
	}
	b.outage.observe(b.log, err, b.queue.pending)
	b.queue.done(key, e, err != nil)
}

// outage logs a period in which publishing fails once when it begins and once when it ends
// (a JetStream leader election lasts seconds and fails hundreds of attempts), with how long it
// lasted and what waits; each attempt is only a debug line and a count in the metrics.
type outage struct {
	mu       sync.Mutex
	since    time.Time // zero: publishing works
	failures int
}

func (o *outage) observe(log *zap.Logger, err error, pending func() int) {
	if errors.Is(err, context.Canceled) {
		return // shutting down, not an outage
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err != nil && o.since.IsZero():
		o.since, o.failures = time.Now(), 1
		log.Warn("publishing to JetStream fails; events wait in the queue and are retried with the same ids until acknowledged",
			zap.Int("pending", pending()), zap.Error(err))
	case err != nil:
		o.failures++
	case !o.since.IsZero():
		log.Info("publishing to JetStream works again", zap.Duration("failed_for", time.Since(o.since).Round(time.Millisecond)),
			zap.Int("failed_attempts", o.failures), zap.Int("pending", pending()))
		o.since, o.failures = time.Time{}, 0
	}
}
