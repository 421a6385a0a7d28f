package bridge

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// drillCollector exports what the RestoreDrills' statuses say about the BackupEntries and
// EtcdBackupConfigs they drill.
// The drill function writes each status and then scales to zero, so series of its own would
// vanish between runs, when an entry whose backups stopped matters most; the bridge watches
// RestoreDrills anyway and is always on. It reads the informer's store at every scrape, so a
// status written or a drill deleted needs no bookkeeping of its own. Like the state read from
// NATS, only a bridge that runs its informers (the leader) exports it: another's store is
// empty or stale.
type drillCollector struct {
	// drills is the RestoreDrill informer's store while it is synced and running, else nil.
	drills func() cache.Store

	restorablePoint, lastSuccess, lastRun, maxAge, entries *prometheus.Desc
}

// The states of housekeeper_drill_entries, one per count in a RestoreDrill's status.
const (
	drillEntriesSelected   = "selected"
	drillEntriesRestorable = "restorable"
	drillEntriesFailed     = "failed"
	drillEntriesStale      = "stale"
)

func newDrillCollector(drills func() cache.Store) *drillCollector {
	// kind: BackupEntry, or EtcdBackupConfig with entry its namespace/name.
	perEntry := []string{"drill", "kind", "entry"}
	return &drillCollector{
		drills: drills,
		restorablePoint: prometheus.NewDesc("housekeeper_drill_entry_restorable_point_timestamp_seconds",
			"When the newest snapshot a drill of the entry restored was taken, from the RestoreDrill's status.results: the newest point its backups are proven to restore to; absent when none is.",
			perEntry, nil),
		lastSuccess: prometheus.NewDesc("housekeeper_drill_entry_last_success",
			"1 if the entry's last drill passed (Exact or Restorable), 0 if not (NotRestorable, Unverified, or the drill could not judge), from the RestoreDrill's status.results.",
			perEntry, nil),
		lastRun: prometheus.NewDesc("housekeeper_drill_last_run_timestamp_seconds",
			"When the RestoreDrill's last run started (status.lastRun), in seconds since the epoch; absent before its first.",
			[]string{"drill"}, nil),
		maxAge: prometheus.NewDesc("housekeeper_drill_max_restorable_age_seconds",
			"The RestoreDrill's spec.maxRestorableAge: how old an entry's restorable point may be.",
			[]string{"drill"}, nil),
		entries: prometheus.NewDesc("housekeeper_drill_entries",
			"The RestoreDrill's status counts at its last run: entries selected, restorable and failed in their last drill, and stale (no point restored within maxRestorableAge).",
			[]string{"drill", "state"}, nil),
	}
}

func (c *drillCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.restorablePoint
	ch <- c.lastSuccess
	ch <- c.lastRun
	ch <- c.maxAge
	ch <- c.entries
}

func (c *drillCollector) Collect(ch chan<- prometheus.Metric) {
	store := c.drills()
	if store == nil {
		return
	}
	for _, d := range listAs[*backupv1alpha1.RestoreDrill](store.List()) {
		gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append([]string{d.Name}, labels...)...)
		}
		gauge(c.maxAge, d.Spec.EffectiveMaxRestorableAge().Seconds())
		s := d.Status
		if s.LastRun != nil {
			gauge(c.lastRun, seconds(s.LastRun.Time))
		}
		gauge(c.entries, float64(s.Entries), drillEntriesSelected)
		gauge(c.entries, float64(s.Restorable), drillEntriesRestorable)
		gauge(c.entries, float64(s.Failed), drillEntriesFailed)
		gauge(c.entries, float64(s.Stale), drillEntriesStale)
		for _, r := range s.Results {
			success := 0.0
			if backupv1alpha1.Passed(r.Outcome) {
				success = 1
			}
			kind := r.Kind
			if kind == "" {
				kind = backupv1alpha1.DrilledBackupEntry
			}
			gauge(c.lastSuccess, success, kind, r.Entry)
			if p := r.NewestRestorablePoint; p != nil {
				gauge(c.restorablePoint, seconds(p.Time), kind, r.Entry)
			}
		}
	}
}

// statusStore is the informer's store of kind while Run runs it and it has listed, else nil: a
// bridge that does not lead (or no longer does) exports no status.
func (b *Bridge) statusStore(kind events.Kind) func() cache.Store {
	return func() cache.Store {
		if !b.running.Load() {
			return nil
		}
		if inf := b.informerOf(kind); inf != nil && inf.HasSynced() {
			return inf.GetStore()
		}
		return nil
	}
}
