package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The oldest waiting event is exported per outage from its first failure on, every outage at 0
// when nothing waits on it; an event settled, or gone to another replica, no longer waits.
func TestOldestWaitingByOutage(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	w := newWaiting("purge", 2*time.Minute)
	w.now = func() time.Time { return now }
	w.wait("a", OutageUnreachable, now.Add(-3*time.Minute))
	w.wait("b", OutageUnreachable, now.Add(-10*time.Second))
	w.wait("c", OutageNATS, now.Add(-time.Minute))
	w.wait("d", OutageThrottled, now.Add(-time.Hour))
	w.done("c")
	want := `
# HELP housekeeper_function_oldest_waiting_seconds How long the event waiting longest for a dependency (retried while it is away) has waited, by function and outage (unreachable, throttled, unavailable, nats); 0: none waits.
# TYPE housekeeper_function_oldest_waiting_seconds gauge
housekeeper_function_oldest_waiting_seconds{function="purge",outage="nats"} 0
housekeeper_function_oldest_waiting_seconds{function="purge",outage="throttled"} 3600
housekeeper_function_oldest_waiting_seconds{function="purge",outage="unavailable"} 0
housekeeper_function_oldest_waiting_seconds{function="purge",outage="unreachable"} 180
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Three minutes on, nothing came back here: forgotten.
	now = now.Add(3 * time.Minute)
	if got := w.oldest(); len(got) != 0 {
		t.Errorf("after forgetAfter without a retry here: %v, want none", got)
	}
}
