package bridge

import "github.com/prometheus/client_golang/prometheus"

// metrics of a bridge, registered on the registry given to New.
type metrics struct {
	published     *prometheus.CounterVec
	duplicates    prometheus.Counter
	publishErrors prometheus.Counter
	latency       prometheus.Histogram
	unchanged     prometheus.Counter
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
		unchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "objects_unchanged_total",
			Help: "Objects listed again (a start, a relist, the periodic resync) with nothing outstanding and the inputs of their last event: not announced again.",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "housekeeper", Subsystem: "bridge", Name: "queue_depth",
		Help: "Objects whose latest event is not yet acknowledged (waiting or in flight).",
	}, func() float64 { return float64(q.pending()) })
	if reg != nil {
		reg.MustRegister(m.published, m.duplicates, m.publishErrors, m.latency, m.unchanged, depth)
	}
	return m
}

// stateMetrics are what NATS holds rather than what a process does: dead letters stored,
// purges scheduled, the last purge completed. Only the leading bridge reads them (stateReader),
// so only it exports them; functions scale to zero and could not. The vectors without labels
// are series only while read.
type stateMetrics struct {
	leader        prometheus.Gauge
	deadLetters   *prometheus.GaugeVec
	lostMessages  *prometheus.GaugeVec
	purgesPending *prometheus.GaugeVec
	oldestDue     *prometheus.GaugeVec
	lastPurgeDone *prometheus.GaugeVec
}

func newStateMetrics(reg prometheus.Registerer) *stateMetrics {
	m := &stateMetrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "bridge", Name: "leader",
			Help: "1 while this bridge leads (announces objects and reads the state below), else 0.",
		}),
		deadLetters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "deadletter", Name: "messages",
			Help: "Dead letters stored in HOUSEKEEPER_DEADLETTER, by function: unresolved until retried or discarded (or aged out); 0 once a function's are gone.",
		}, []string{"function"}),
		lostMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "stream", Name: "lost_messages",
			Help: "Messages the stream reports lost (its state's lost list: a disk fault, a corrupt block), by stream: events or dead letters gone without being handled.",
		}, []string{"stream"}),
		purgesPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "purges", Name: "pending",
			Help: "Purges scheduled on the NATS server and not yet fired (schedule holders on housekeeper.schedule.purge.*).",
		}, nil),
		oldestDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "purges", Name: "oldest_due_timestamp_seconds",
			Help: "When the earliest pending purge is due, in seconds since the epoch; absent without pending purges.",
		}, nil),
		lastPurgeDone: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "purge", Name: "last_success_timestamp_seconds",
			Help: "When the last purge completed (its purge.completed report stored in the audit stream), in seconds since the epoch; absent when none is in the stream's retention.",
		}, nil),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.deadLetters, m.lostMessages, m.purgesPending, m.oldestDue, m.lastPurgeDone)
	}
	return m
}
