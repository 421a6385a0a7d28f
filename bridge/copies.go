package bridge

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// copyCollector exports what the BackupCopyPolicies' statuses say about their entries' copies,
// for the reason drillCollector exports the drills': the copy function writes each status and
// scales to zero, so its own series vanish between runs, when a copy that stopped matters most.
// Only the leading bridge, whose informers run, exports it.
type copyCollector struct {
	// policies is the BackupCopyPolicy informer's store while it is synced and running, else nil.
	policies func() cache.Store

	entries, objective, lastRun, lastComplete, failedOver *prometheus.Desc
}

// The states of housekeeper_copy_policy_entries, one per count in a BackupCopyPolicy's status.
const (
	copyEntriesSelected = "selected"
	copyEntriesFailed   = "failed"
	copyEntriesBehind   = "behind"
)

func newCopyCollector(policies func() cache.Store) *copyCollector {
	return &copyCollector{
		policies: policies,
		entries: prometheus.NewDesc("housekeeper_copy_policy_entries",
			"The BackupCopyPolicy's status counts at its last run: entries selected, failed (not wholly in the copy: an object differs or could not be copied) and behind (further behind than lagObjective).",
			[]string{"policy", "state"}, nil),
		objective: prometheus.NewDesc("housekeeper_copy_policy_lag_objective_seconds",
			"The BackupCopyPolicy's spec.lagObjective: how far behind its source an entry's copy may be.",
			[]string{"policy"}, nil),
		lastRun: prometheus.NewDesc("housekeeper_copy_policy_last_run_timestamp_seconds",
			"When the BackupCopyPolicy's last run started (status.lastRun), in seconds since the epoch; absent before its first.",
			[]string{"policy"}, nil),
		lastComplete: prometheus.NewDesc("housekeeper_copy_entry_last_complete_timestamp_seconds",
			"When the last run that found every object of the entry in the copy, verified, started (status.results[].lastComplete); absent before the first.",
			[]string{"policy", "entry"}, nil),
		failedOver: prometheus.NewDesc("housekeeper_copy_policy_failed_over",
			"1 while the BackupCopyPolicy has failed over (spec.failOver, or a return whose copy back is not done): its entries' etcd-backup secrets point at the destination and nothing is copied; else 0.",
			[]string{"policy"}, nil),
	}
}

func (c *copyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.objective
	ch <- c.lastRun
	ch <- c.lastComplete
	ch <- c.failedOver
}

func (c *copyCollector) Collect(ch chan<- prometheus.Metric) {
	store := c.policies()
	if store == nil {
		return
	}
	for _, p := range listAs[*backupv1alpha1.BackupCopyPolicy](store.List()) {
		gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{p.Name}, labels...)...)
		}
		gauge(c.objective, p.Spec.EffectiveLagObjective().Seconds())
		failedOver := 0.0
		if p.FailedOver() {
			failedOver = 1
		}
		gauge(c.failedOver, failedOver)
		s := p.Status
		if s.LastRun != nil {
			gauge(c.lastRun, seconds(s.LastRun.Time))
		}
		gauge(c.entries, float64(s.Entries), copyEntriesSelected)
		gauge(c.entries, float64(s.Failed), copyEntriesFailed)
		gauge(c.entries, float64(s.Behind), copyEntriesBehind)
		for _, r := range s.Results {
			if r.LastComplete != nil {
				gauge(c.lastComplete, seconds(r.LastComplete.Time), r.Entry)
			}
		}
	}
}
