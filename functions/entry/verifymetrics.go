package entry

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a verify purge.
const (
	VerifiedEmpty         = "empty"          // no marked object is left under the prefix
	VerifiedStillLocked   = "still_locked"   // some are locked still; another verify is scheduled
	VerifiedNotVerifiable = "not_verifiable" // the bucket is not on this seed (a source- entry)
)

// verifiedResults label the objects a verify purge found: deleted, locked still, left alone.
var verifiedResults = [...]string{"deleted", "still_locked", "unmarked"}

// VerifyMetrics counts what verify purges found: the promise a released entry left behind,
// kept visible.
type VerifyMetrics struct {
	outcomes *prometheus.CounterVec
	objects  *prometheus.CounterVec
}

// NewVerifyMetrics registers the metrics with reg (nil: unregistered). Every outcome and result
// is exported from the start, at zero: the dashboard's panels and increase() then see the first
// verify purge of a process, which usually runs once.
func NewVerifyMetrics(reg prometheus.Registerer) *VerifyMetrics {
	m := &VerifyMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "purge", Name: "verifications_total",
			Help: "Verify purges of released entries' locked objects, by outcome (empty, still_locked, not_verifiable).",
		}, []string{"outcome"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "housekeeper", Subsystem: "purge", Name: "verified_objects_total",
			Help: "Objects verify purges found under released prefixes, by result (deleted, still_locked, unmarked: left alone).",
		}, []string{"result"}),
	}
	for _, outcome := range []string{VerifiedEmpty, VerifiedStillLocked, VerifiedNotVerifiable} {
		m.outcomes.WithLabelValues(outcome)
	}
	for _, result := range verifiedResults {
		m.objects.WithLabelValues(result)
	}
	if reg != nil {
		reg.MustRegister(m.outcomes, m.objects)
	}
	return m
}

func (m *VerifyMetrics) observe(outcome string, deleted, locked, unmarked int) {
	if m == nil {
		return
	}
	m.outcomes.WithLabelValues(outcome).Inc()
	for i, n := range [len(verifiedResults)]int{deleted, locked, unmarked} {
		m.objects.WithLabelValues(verifiedResults[i]).Add(float64(n))
	}
}
