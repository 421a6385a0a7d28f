package drill

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Metrics are the drill function's: per RestoreDrill and entry what its last drill found, to
// alert on an entry that does not restore or has gone too long without a restorable point.
type Metrics struct {
	lastRun         *prometheus.GaugeVec
	lastSuccess     *prometheus.GaugeVec
	restorablePoint *prometheus.GaugeVec
	maxAge          *prometheus.GaugeVec
	duration        *prometheus.HistogramVec

	mu sync.Mutex
	// entries are the entries each RestoreDrill has series of, to delete those of an entry
	// it no longer selects.
	entries map[string]map[string]bool
}

// NewMetrics registers the metrics with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	perEntry := []string{"drill", "entry"}
	m := &Metrics{
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "last_run_timestamp_seconds",
			Help: "When the entry's last drill started, by RestoreDrill and BackupEntry.",
		}, perEntry),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "last_success",
			Help: "1 if the entry's last drill restored its backups, 0 if not (NotRestorable, or the drill could not judge).",
		}, perEntry),
		restorablePoint: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "restorable_point_timestamp_seconds",
			Help: "When the newest snapshot a drill of the entry restored was taken: the newest point its backups are proven to restore to.",
		}, perEntry),
		maxAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "max_restorable_age_seconds",
			Help: "The RestoreDrill's spec.maxRestorableAge: how old an entry's restorable point may be.",
		}, []string{"drill"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "housekeeper", Subsystem: "drill", Name: "duration_seconds",
			Help:    "How long one entry's drill took, by outcome (Restorable, NotRestorable, Error).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 s … 2.3 h
		}, []string{"outcome"}),
		entries: map[string]map[string]bool{},
	}
	if reg != nil {
		reg.MustRegister(m.lastRun, m.lastSuccess, m.restorablePoint, m.maxAge, m.duration)
	}
	return m
}

func (m *Metrics) observeDuration(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(outcome).Observe(d.Seconds())
}

// observe sets the series of the RestoreDrill drill after a run: reports are its drills,
// selected the entries it selects, results its status's results as recorded (which keep an
// entry's restorable point across failed drills). The series of an entry no longer selected
// are deleted.
func (m *Metrics) observe(drill string, reports []backupv1alpha1.EntryDrillResult, selected []string, results []backupv1alpha1.EntryDrillResult, maxAge time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maxAge.WithLabelValues(drill).Set(maxAge.Seconds())
	now := make(map[string]bool, len(selected))
	for _, name := range selected {
		now[name] = true
	}
	for name := range m.entries[drill] {
		if !now[name] {
			m.deleteEntry(drill, name)
		}
	}
	drilled := make(map[string]bool, len(reports))
	for _, r := range reports {
		drilled[r.Entry] = true
		m.lastRun.WithLabelValues(drill, r.Entry).Set(float64(r.Time.Unix()))
		success := 0.0
		if r.Outcome == backupv1alpha1.OutcomeRestorable {
			success = 1
		}
		m.lastSuccess.WithLabelValues(drill, r.Entry).Set(success)
	}
	for _, r := range results {
		if drilled[r.Entry] && r.NewestRestorablePoint != nil {
			m.restorablePoint.WithLabelValues(drill, r.Entry).Set(float64(r.NewestRestorablePoint.Unix()))
		}
	}
	m.entries[drill] = now
}

// forget deletes every series of a RestoreDrill that is gone.
func (m *Metrics) forget(drill string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.entries[drill] {
		m.deleteEntry(drill, name)
	}
	delete(m.entries, drill)
	m.maxAge.DeleteLabelValues(drill)
}

func (m *Metrics) deleteEntry(drill, name string) {
	m.lastRun.DeleteLabelValues(drill, name)
	m.lastSuccess.DeleteLabelValues(drill, name)
	m.restorablePoint.DeleteLabelValues(drill, name)
}
