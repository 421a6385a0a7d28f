package bridge

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// The running bridge exports each RestoreDrill's status as the drill function wrote it, between
// runs as well: when it last ran, per entry its last outcome and newest restorable point (absent when it has
// none), the drill's maxRestorableAge and its counts. A status rewritten changes them, a drill
// deleted takes its series along, and a bridge that stopped exports none.
func TestBridgeExportsRestoreDrillStatus(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	h.reg = reg
	ctx := context.Background()

	weekly := restoreDrill("weekly") // never run: no status
	h.create(weekly)
	nightly := restoreDrill("nightly")
	nightly.Spec.MaxRestorableAge = &metav1.Duration{Duration: 6 * time.Hour}
	h.create(nightly)
	now := time.Now().Truncate(time.Second)
	good, old := metav1.NewTime(now.Add(-time.Hour)), metav1.NewTime(now.Add(-30*time.Hour))
	// broken's result has no kind, as a status written before results had one: a BackupEntry.
	nightly.Status = backupv1alpha1.RestoreDrillStatus{LastRun: &metav1.Time{Time: now}, Entries: 4, Restorable: 2, Failed: 1, Stale: 2,
		Results: []backupv1alpha1.EntryDrillResult{
			{Entry: "broken", Outcome: backupv1alpha1.OutcomeNotRestorable, Time: metav1.NewTime(now), NewestRestorablePoint: &old},
			{Entry: "good", Kind: backupv1alpha1.DrilledBackupEntry, Outcome: backupv1alpha1.OutcomeRestorable, Time: metav1.NewTime(now), NewestRestorablePoint: &good},
			{Entry: "team/main", Kind: backupv1alpha1.DrilledEtcdBackupConfig, Outcome: backupv1alpha1.OutcomeExact, Time: metav1.NewTime(now), NewestRestorablePoint: &good},
		}}
	if err := h.c.Status().Update(ctx, nightly); err != nil {
		t.Fatal(err)
	}
	unix := func(t metav1.Time) string { return strconv.FormatInt(t.Unix(), 10) }

	_, stop := h.start(Options{})
	eventually(t, reg, "the drills' series", map[string]string{
		`housekeeper_drill_max_restorable_age_seconds{drill="nightly"}`:                                                         "21600",
		`housekeeper_drill_max_restorable_age_seconds{drill="weekly"}`:                                                          "86400",
		`housekeeper_drill_entries{drill="nightly",state="selected"}`:                                                           "4",
		`housekeeper_drill_entries{drill="nightly",state="restorable"}`:                                                         "2",
		`housekeeper_drill_entries{drill="nightly",state="failed"}`:                                                             "1",
		`housekeeper_drill_entries{drill="nightly",state="stale"}`:                                                              "2",
		`housekeeper_drill_entries{drill="weekly",state="stale"}`:                                                               "0",
		`housekeeper_drill_entry_last_success{drill="nightly",entry="good",kind="BackupEntry"}`:                                 "1",
		`housekeeper_drill_entry_last_success{drill="nightly",entry="broken",kind="BackupEntry"}`:                               "0",
		`housekeeper_drill_entry_restorable_point_timestamp_seconds{drill="nightly",entry="good",kind="BackupEntry"}`:           unix(good),
		`housekeeper_drill_entry_restorable_point_timestamp_seconds{drill="nightly",entry="broken",kind="BackupEntry"}`:         unix(old),
		`housekeeper_drill_entry_last_success{drill="nightly",entry="team/main",kind="EtcdBackupConfig"}`:                       "1",
		`housekeeper_drill_entry_restorable_point_timestamp_seconds{drill="nightly",entry="team/main",kind="EtcdBackupConfig"}`: unix(good),
	})

	// The next run: broken restores now, good is no longer selected, and gone, drilled for the
	// first time, could not be judged: it has no restorable point yet.
	nightly.Status.Restorable, nightly.Status.Failed, nightly.Status.Stale = 2, 1, 1
	nightly.Status.Results = []backupv1alpha1.EntryDrillResult{
		{Entry: "gone", Outcome: backupv1alpha1.OutcomeError, Time: metav1.NewTime(now)},
		{Entry: "broken", Outcome: backupv1alpha1.OutcomeRestorable, Time: metav1.NewTime(now), NewestRestorablePoint: &good},
	}
	if err := h.c.Status().Update(ctx, nightly); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "the rewritten status", map[string]string{
		`housekeeper_drill_entries{drill="nightly",state="stale"}`:                                                      "1",
		`housekeeper_drill_entry_last_success{drill="nightly",entry="broken",kind="BackupEntry"}`:                       "1",
		`housekeeper_drill_entry_restorable_point_timestamp_seconds{drill="nightly",entry="broken",kind="BackupEntry"}`: unix(good),
		`housekeeper_drill_entry_last_success{drill="nightly",entry="gone",kind="BackupEntry"}`:                         "0",
		`housekeeper_drill_entry_restorable_point_timestamp_seconds{drill="nightly",entry="gone",kind="BackupEntry"}`:   "",
		`housekeeper_drill_entry_last_success{drill="nightly",entry="good",kind="BackupEntry"}`:                         "",
	})

	if err := h.c.Delete(ctx, nightly); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "the deleted drill's series gone", map[string]string{
		`housekeeper_drill_max_restorable_age_seconds{drill="nightly"}`:                           "",
		`housekeeper_drill_entries{drill="nightly",state="selected"}`:                             "",
		`housekeeper_drill_entry_last_success{drill="nightly",entry="broken",kind="BackupEntry"}`: "",
		`housekeeper_drill_max_restorable_age_seconds{drill="weekly"}`:                            "86400",
		`housekeeper_drill_entries{drill="weekly",state="selected"}`:                              "0",
	})

	stop()
	eventually(t, reg, "no drill exported by a stopped bridge", map[string]string{
		`housekeeper_drill_max_restorable_age_seconds{drill="weekly"}`: "",
	})
}
