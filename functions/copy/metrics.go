package copy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
)

// Metrics are the copy function's: what its runs copied and found, and each entry's lag at
// its last run. The policy's status holds the same per entry between runs, when this
// function's pod may be scaled to zero.
type Metrics struct {
	objects, bytes, serverSide, verification *prometheus.CounterVec
	lag                                      *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "copy", Name: "objects_total",
			Help: "Objects copied to a BackupCopyPolicy's destination and verified there.",
		}, []string{"policy"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "copy", Name: "bytes_total",
			Help: "Bytes of the objects copied to a BackupCopyPolicy's destination and verified there.",
		}, []string{"policy"}),
		serverSide: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "copy", Name: "server_side_objects_total",
			Help: "Of the objects copied, those the destination's store copied from the source itself, the bytes never passing through the copy function.",
		}, []string{"policy"}),
		verification: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "copy", Name: "verification_failures_total",
			Help: "Objects the copy holds with content other than the source's (kept), and objects written that did not verify (removed again), by kind: differs, verify.",
		}, []string{"policy", "kind"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "copy", Name: "entry_lag_seconds",
			Help: "How far behind its source an entry's copy was at its last run: seconds since a run last found every object of the entry in the copy, verified; 0 when it did.",
		}, []string{"policy", "entry"}),
	}
	if reg != nil {
		reg.MustRegister(m.objects, m.bytes, m.serverSide, m.verification, m.lag)
	}
	return m
}

// observe counts what one entry's copy did.
func (m *Metrics) observe(policy string, c Copied, r backupv1alpha1.EntryCopyResult) {
	if m == nil {
		return
	}
	m.lag.WithLabelValues(policy, c.Entry).Set(r.Lag.Seconds())
	rep := c.Report
	if rep == nil {
		return
	}
	m.objects.WithLabelValues(policy).Add(float64(rep.Copied))
	m.bytes.WithLabelValues(policy).Add(float64(rep.CopiedBytes))
	m.serverSide.WithLabelValues(policy).Add(float64(rep.ServerSide))
	// Both kinds' series from the first run on, zero or not: a rate over them needs no absent().
	verifyFailed := 0
	for _, f := range rep.Failed {
		if errors.Is(f.Err, replica.ErrVerifyFailed) {
			verifyFailed++
		}
	}
	m.verification.WithLabelValues(policy, "differs").Add(float64(len(rep.Differing)))
	m.verification.WithLabelValues(policy, "verify").Add(float64(verifyFailed))
}

// forget drops the lag of the policy's entries that it no longer selects.
func (m *Metrics) forget(policy string, entries []string) {
	if m == nil {
		return
	}
	for _, e := range entries {
		m.lag.DeleteLabelValues(policy, e)
	}
}
