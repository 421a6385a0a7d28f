package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// A RestoreDrill's dead letter is resolved by what its function's work leaves on the object: a
// schedule's once the current generation is scheduled, a drill's once a run after the failure
// was recorded.
func TestDrillDeadLetterState(t *testing.T) {
	failed := time.Date(2026, 11, 27, 10, 0, 0, 500, time.UTC)
	drill := func(generation, observed int64, scheduled metav1.ConditionStatus, lastRun *time.Time) *backupv1alpha1.RestoreDrill {
		d := &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		d.Status.ObservedGeneration = observed
		if scheduled != "" {
			d.Status.Conditions = []metav1.Condition{{Type: backupv1alpha1.ConditionScheduled, Status: scheduled}}
		}
		if lastRun != nil {
			d.Status.LastRun = &metav1.Time{Time: *lastRun}
			d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: backupv1alpha1.ConditionDrillsSucceeded,
				Status: metav1.ConditionFalse, Message: "1 of 2 entries did not restore"})
		}
		return d
	}
	before, same, after := failed.Add(-time.Minute), failed.Truncate(time.Second), failed.Add(time.Minute)
	for _, tc := range []struct {
		name     string
		function string
		drill    *backupv1alpha1.RestoreDrill
		state    string
		resolved bool
	}{
		{"schedule, nothing yet", "schedule", drill(1, 0, "", nil), "no conditions yet", false},
		{"schedule, an older generation scheduled", "schedule", drill(2, 1, metav1.ConditionTrue, nil), "Scheduled=True", false},
		{"schedule, this generation scheduled", "schedule", drill(2, 2, metav1.ConditionTrue, nil), "Scheduled=True", true},
		{"schedule, refused", "schedule", drill(2, 2, metav1.ConditionFalse, nil), "Scheduled=False", false},
		{"drill, last run before the failure", "drill", drill(1, 1, metav1.ConditionTrue, &before), "Scheduled=True, DrillsSucceeded=False, 1 of 2 entries did not restore", false},
		{"drill, a run in the failure's second", "drill", drill(1, 1, metav1.ConditionTrue, &same), "Scheduled=True, DrillsSucceeded=False, 1 of 2 entries did not restore", true},
		{"drill, a run after the failure", "drill", drill(1, 1, metav1.ConditionTrue, &after), "Scheduled=True, DrillsSucceeded=False, 1 of 2 entries did not restore", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, resolved := drillState(tc.drill, runner.DeadLetter{Function: tc.function, FailedAt: failed})
			if state != tc.state || resolved != tc.resolved {
				t.Errorf("got %q resolved %v, want %q resolved %v", state, resolved, tc.state, tc.resolved)
			}
		})
	}
}

// A BackupCopyPolicy's dead letter is resolved as a RestoreDrill's: a copy's once a run after the
// failure was recorded, a schedule's once the current generation is scheduled.
func TestCopyPolicyDeadLetterState(t *testing.T) {
	failed := time.Date(2026, 11, 29, 10, 0, 0, 500, time.UTC)
	policy := func(lastRun time.Time) *backupv1alpha1.BackupCopyPolicy {
		p := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		p.Status.ObservedGeneration, p.Status.LastRun = 2, &metav1.Time{Time: lastRun}
		p.Status.Conditions = []metav1.Condition{{Type: backupv1alpha1.ConditionScheduled, Status: metav1.ConditionTrue},
			{Type: backupv1alpha1.ConditionCopiesSucceeded, Status: metav1.ConditionFalse, Message: "1 of 2 entries are not wholly in the copy"}}
		return p
	}
	const state = "Scheduled=True, CopiesSucceeded=False, 1 of 2 entries are not wholly in the copy"
	for _, tc := range []struct {
		name     string
		function string
		lastRun  time.Time
		resolved bool
	}{
		{"copy, last run before the failure", "copy", failed.Add(-time.Minute), false},
		{"copy, a run after the failure", "copy", failed.Add(time.Minute), true},
		{"schedule, this generation scheduled", "schedule", failed.Add(-time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, resolved := policyState(policy(tc.lastRun), runner.DeadLetter{Function: tc.function, FailedAt: failed})
			if got != state || resolved != tc.resolved {
				t.Errorf("got %q resolved %v, want %q resolved %v", got, resolved, state, tc.resolved)
			}
		})
	}
}
