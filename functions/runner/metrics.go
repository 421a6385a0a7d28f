package runner

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	handled  *prometheus.CounterVec
	failed   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "function", Name: "handled_total",
			Help: "Deliveries handled, by function and outcome (success, waiting, retry, deadletter, shutdown).",
		}, []string{"function", "outcome"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "function", Name: "failed_total",
			Help: "Handler failures, by function and class (retryable, unavailable, permanent).",
		}, []string{"function", "class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "housekeeper", Subsystem: "function", Name: "handler_duration_seconds",
			Help:    "Time a handler took, by function.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"function"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "function", Name: "in_flight",
			Help: "Events being handled now, by function.",
		}, []string{"function"}),
	}
	if reg != nil {
		// Several functions in one process (the forwarder) share the collectors.
		m.handled = Register(reg, m.handled)
		m.failed = Register(reg, m.failed)
		m.duration = Register(reg, m.duration)
		m.inFlight = Register(reg, m.inFlight)
	}
	return m
}

// Register registers c with reg, or returns the collector registered before it under the same
// name: several functions in one process share their collectors.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var registered prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c
	case errors.As(err, &registered):
		if existing, ok := registered.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}
