package bridge

import (
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/client-go/util/workqueue"
)

// queue is a rate-limited workqueue of object keys (kind/uid) with the latest event per key
// beside it. Adding an event for a key that is already waiting replaces the waiting event:
// consumers converge to the live object, so the latest state is all that must get through.
type queue struct {
	work workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	latest map[string]cloudevents.Event
	// taken holds the keys between next and done (events in flight); both counts those
	// that also have a newer event waiting in latest.
	taken map[string]struct{}
	both  int
}

func newQueue(maxRetryDelay time.Duration) *queue {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, maxRetryDelay)
	return &queue{
		work:   workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "bridge"}),
		latest: map[string]cloudevents.Event{},
		taken:  map[string]struct{}{},
	}
}

// add queues e for key, replacing an event not yet taken.
func (q *queue) add(key string, e cloudevents.Event) {
	q.mu.Lock()
	if _, waiting := q.latest[key]; !waiting {
		if _, inFlight := q.taken[key]; inFlight {
			q.both++
		}
	}
	q.latest[key] = e
	q.mu.Unlock()
	q.work.Add(key)
}

// next blocks for the next key and takes its event; ok is false once the queue shut down.
// The caller must call done(key, ...) when finished.
func (q *queue) next() (key string, e cloudevents.Event, ok bool) {
	for {
		key, shutdown := q.work.Get()
		if shutdown {
			return "", cloudevents.Event{}, false
		}
		q.mu.Lock()
		e, found := q.latest[key]
		delete(q.latest, key)
		if found {
			q.taken[key] = struct{}{}
		}
		q.mu.Unlock()
		if found {
			return key, e, true
		}
		// Already published by an earlier turn of this key.
		q.work.Done(key)
	}
}

// done finishes key's turn. A failed event is put back unless a newer one arrived meanwhile,
// and the key retried with backoff; a published one resets the key's backoff.
func (q *queue) done(key string, e cloudevents.Event, failed bool) {
	defer q.work.Done(key)
	q.mu.Lock()
	delete(q.taken, key)
	_, newer := q.latest[key]
	switch {
	case newer:
		q.both--
	case failed:
		q.latest[key] = e
	}
	q.mu.Unlock()
	if failed {
		q.work.AddRateLimited(key)
	} else {
		q.work.Forget(key)
	}
}

// pending counts the objects whose latest event is not yet acknowledged: waiting or in flight.
func (q *queue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.latest) + len(q.taken) - q.both
}

func (q *queue) shutdown() { q.work.ShutDown() }
