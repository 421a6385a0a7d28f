package events

import (
	"slices"
	"testing"
)

// Only the server's scheduler fires due events: no identity may publish on their subjects, so
// a function that receives one knows a schedule fired it. The bridge alone publishes object
// events, RestoreDrills' and BackupCopyPolicies' among them.
func TestNobodyPublishesDueEvents(t *testing.T) {
	perms := []Permission{BridgePermission(), SetupPermission(), OperatorPermission(),
		FunctionPermission("schedule", SubjectEtcdBackupSchedules, SubjectEtcdBackupUnschedules, SubjectDrillSchedules, SubjectDrillUnschedules,
			SubjectCopySchedules, SubjectCopyUnschedules),
		ForwardPermission("schedule", "snapshot", "drill", "copy")}
	for _, p := range perms {
		for _, due := range []string{"housekeeper.purge.due.x", "housekeeper.etcdbackup.due.x", "housekeeper.drill.due.x", "housekeeper.copy.due.x"} {
			if publishes(p, due) {
				t.Errorf("%s may publish %s", p.Identity, due)
			}
		}
	}
	drillCreated, _ := Subject(TypeRestoreDrillCreated, "weekly")
	policyUpdated, _ := Subject(TypeBackupCopyPolicyUpdated, "second-copy")
	for _, created := range []string{drillCreated, policyUpdated} {
		if !publishes(BridgePermission(), created) {
			t.Errorf("the bridge may not publish %s", created)
		}
		for _, p := range perms[1:] {
			if publishes(p, created) {
				t.Errorf("%s may publish %s", p.Identity, created)
			}
		}
	}
}

// publishes reports whether p may publish on subject.
func publishes(p Permission, subject string) bool {
	return slices.ContainsFunc(p.Publish, func(s string) bool { return subjectMatches(s, subject) })
}
