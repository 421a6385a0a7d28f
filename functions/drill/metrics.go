package drill

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the drill function's: how long drills take. What they found is in each
// RestoreDrill's status, which the bridge exports: its pod is always on, this function's is
// scaled to zero between runs, when an entry that stopped restoring must still alert.
type Metrics struct {
	duration *prometheus.HistogramVec
}

// NewMetrics registers the metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "duration_seconds",
			Help:    "How long one entry's drill took, by outcome (Restorable, NotRestorable, Error).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 s … 2.3 h
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.duration)
	}
	return m
}

func (m *Metrics) observeDuration(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(outcome).Observe(d.Seconds())
}
