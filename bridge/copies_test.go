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

// The running bridge exports each BackupCopyPolicy's status as the copy function wrote it,
// between runs as well: its lag objective, when it last ran, its counts, and per entry when its
// last complete copy started (absent before the first). A policy deleted takes its series along,
// and a bridge that stopped exports none.
func TestBridgeExportsBackupCopyPolicyStatus(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	h.reg = reg
	ctx := context.Background()

	newPolicy := func(name string) *backupv1alpha1.BackupCopyPolicy {
		return &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Types: []string{"local"}}, Destination: "second", Schedule: "@hourly"}}
	}
	fresh := newPolicy("fresh") // never run: no status
	h.create(fresh)
	hourly := newPolicy("hourly")
	hourly.Spec.LagObjective = &metav1.Duration{Duration: 6 * time.Hour}
	h.create(hourly)
	returning := newPolicy("returning") // failed over, its copy back not done
	h.create(returning)
	returning.Status.FailOver = &backupv1alpha1.FailOverStatus{Since: metav1.Now(), Phase: backupv1alpha1.FailOverReturning}
	if err := h.c.Status().Update(ctx, returning); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	done := metav1.NewTime(now.Add(-time.Hour))
	hourly.Status = backupv1alpha1.BackupCopyPolicyStatus{LastRun: &metav1.Time{Time: now}, Entries: 3, Failed: 1, Behind: 2,
		Results: []backupv1alpha1.EntryCopyResult{
			{Entry: "copied", Bucket: "b", Time: metav1.NewTime(now), Complete: true, LastComplete: &done},
			{Entry: "never", Bucket: "b", Time: metav1.NewTime(now), Reason: "1 object differs"},
		}}
	if err := h.c.Status().Update(ctx, hourly); err != nil {
		t.Fatal(err)
	}

	_, stop := h.start(Options{})
	eventually(t, reg, "the policies' series", map[string]string{
		`housekeeper_copy_policy_lag_objective_seconds{policy="hourly"}`:                         "21600",
		`housekeeper_copy_policy_lag_objective_seconds{policy="fresh"}`:                          "86400",
		`housekeeper_copy_policy_last_run_timestamp_seconds{policy="hourly"}`:                    strconv.FormatInt(now.Unix(), 10),
		`housekeeper_copy_policy_last_run_timestamp_seconds{policy="fresh"}`:                     "",
		`housekeeper_copy_policy_entries{policy="hourly",state="selected"}`:                      "3",
		`housekeeper_copy_policy_entries{policy="hourly",state="failed"}`:                        "1",
		`housekeeper_copy_policy_entries{policy="hourly",state="behind"}`:                        "2",
		`housekeeper_copy_policy_entries{policy="fresh",state="behind"}`:                         "0",
		`housekeeper_copy_entry_last_complete_timestamp_seconds{entry="copied",policy="hourly"}`: strconv.FormatInt(done.Unix(), 10),
		`housekeeper_copy_entry_last_complete_timestamp_seconds{entry="never",policy="hourly"}`:  "",
		`housekeeper_copy_policy_failed_over{policy="hourly"}`:                                   "0",
		`housekeeper_copy_policy_failed_over{policy="returning"}`:                                "1",
	})

	if err := h.c.Delete(ctx, hourly); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "the deleted policy's series gone", map[string]string{
		`housekeeper_copy_policy_entries{policy="hourly",state="selected"}`:                      "",
		`housekeeper_copy_entry_last_complete_timestamp_seconds{entry="copied",policy="hourly"}`: "",
		`housekeeper_copy_policy_entries{policy="fresh",state="selected"}`:                       "0",
	})

	stop()
	eventually(t, reg, "no policy exported by a stopped bridge", map[string]string{
		`housekeeper_copy_policy_lag_objective_seconds{policy="fresh"}`: "",
	})
}
