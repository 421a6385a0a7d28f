package bridge

import "github.com/prometheus/client_golang/prometheus"

// metrics of a bridge, registered on the registry given to New.
type metrics struct {
	published     *prometheus.CounterVec
	duplicates    prometheus.Counter
	publishErrors prometheus.Counter
	latency       prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, q *queue) *metrics {
	m := &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "events_published_total",
			Help: "Events acknowledged by JetStream, by type.",
		}, []string{"type"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "events_duplicate_total",
			Help: "Published events JetStream reported as duplicates (same id inside the duplicate window).",
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "publish_errors_total",
			Help: "Publish attempts that failed and were queued for retry.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "publish_latency_seconds",
			Help:    "Time from publish to JetStream ack.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "housekeeper", Subsystem: "bridge", Name: "queue_depth",
		Help: "Objects whose latest event is not yet acknowledged (waiting or in flight).",
	}, func() float64 { return float64(q.pending()) })
	if reg != nil {
		reg.MustRegister(m.published, m.duplicates, m.publishErrors, m.latency, depth)
	}
	return m
}
