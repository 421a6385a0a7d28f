package runner

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// waiting tracks the events a worker retries because a dependency is away, by the outage they
// wait on, for housekeeper_function_oldest_waiting_seconds. An event waits from its first
// failure for an outage (events.HeaderWaitingSince, carried across its retries) until it is
// settled otherwise. One that has not come back to this worker for forgetAfter went to another
// replica, or was settled there: it is forgotten.
type waiting struct {
	desc        *prometheus.Desc
	forgetAfter time.Duration
	now         func() time.Time

	mu     sync.Mutex
	events map[string]waiter
}

type waiter struct {
	since, seen time.Time
	outage      string
}

func newWaiting(function string, forgetAfter time.Duration) *waiting {
	desc := prometheus.NewDesc("housekeeper_function_oldest_waiting_seconds",
		"How long the event waiting longest for a dependency (retried while it is away) has waited, by function and outage (unreachable, throttled, unavailable, nats); 0: none waits.",
		[]string{"outage"}, prometheus.Labels{"function": function})
	return &waiting{desc: desc, forgetAfter: forgetAfter, now: time.Now, events: map[string]waiter{}}
}

// wait records that event id waits on outage since since.
func (w *waiting) wait(id, outage string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events[id] = waiter{since: since, seen: w.now(), outage: outage}
}

// done records that event id no longer waits.
func (w *waiting) done(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.events, id)
}

// oldest is, per outage, how long the event waiting longest has waited.
func (w *waiting) oldest() map[string]time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	out := map[string]time.Duration{}
	for id, e := range w.events {
		if now.Sub(e.seen) > w.forgetAfter {
			delete(w.events, id)
			continue
		}
		out[e.outage] = max(out[e.outage], now.Sub(e.since))
	}
	return out
}

func (w *waiting) Describe(ch chan<- *prometheus.Desc) { ch <- w.desc }

// Collect exports every outage, 0 where nothing waits, so that an alert's series exist on a
// healthy installation too.
func (w *waiting) Collect(ch chan<- prometheus.Metric) {
	oldest := w.oldest()
	for _, outage := range outages {
		ch <- prometheus.MustNewConstMetric(w.desc, prometheus.GaugeValue, oldest[outage].Seconds(), outage)
	}
}
