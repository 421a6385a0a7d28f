package seed

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// drilledEntry's prefix holds what etcd-backup-restore wrote backing up a real etcd.
const drilledEntry = "shoot--dev--drilled--7c1d2"

// drillOnTheNode runs a RestoreDrill of every entry on the node: KEDA wakes the drill
// function from zero, and in its pod the function holds the run to the memory limit the chart
// gives its container, which it reads from its cgroup. A memoryBudget above that limit less
// the process's reserve is refused, naming the limit; the chart's default budget fits: the
// entry whose prefix holds no etcd snapshot is drilled and found NotRestorable, and the entry
// whose prefix holds etcd-backup-restore's snapshots restores, etcd-backup-restore's own
// restore agreeing: its etcdbrctl, which the pod's init containers copied from
// etcd-backup-restore's image (drill.etcdBackupRestoreImage), ran beside the replay. The drill
// deleted, its schedule goes; the drilled entry is purged.
func (s *seed) drillOnTheNode(ctx context.Context) {
	t := s.t
	s.newEntry(ctx, drilledEntry)
	testenv.BackUpEtcd(t, t.TempDir(), s.root, bucketName, gardener.EtcdMainPrefix(drilledEntry))
	chownTree(t, filepath.Join(s.root, bucketName, drilledEntry), 65532)
	d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, "housekeeper-drill", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limit, ok := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the chart's drill Deployment sets no memory limit")
	}
	tooMuch := resource.MustParse("1Gi")
	rd := &backupv1alpha1.RestoreDrill{
		ObjectMeta: metav1.ObjectMeta{Name: "seed"},
		Spec:       backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "@every 5s", MemoryBudget: &tooMuch},
	}
	s.create(ctx, rd)
	start := time.Now()
	drillCondition := func() (*backupv1alpha1.RestoreDrill, *metav1.Condition, error) {
		live := &backupv1alpha1.RestoreDrill{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(rd), live); err != nil {
			return nil, nil, err
		}
		return live, meta.FindStatusCondition(live.Status.Conditions, backupv1alpha1.ConditionDrillsSucceeded), nil
	}
	want := fmt.Sprintf("its container's memory limit %s less 64Mi for the process", limit.String())
	s.eventually(3*time.Minute, "the drill function refuses a budget above its container's memory", func() (bool, string) {
		_, cond, err := drillCondition()
		if err != nil || cond == nil {
			return false, fmt.Sprintf("condition %v, %v", cond, err)
		}
		return cond.Reason == backupv1alpha1.ReasonInvalidDrill && strings.Contains(cond.Message, want), cond.Reason + ": " + cond.Message
	})
	t.Logf("RestoreDrill with memoryBudget %s refused by the drill function woken from zero (%s): %q", tooMuch.String(), time.Since(start).Round(time.Millisecond), want)

	live, _, err := drillCondition()
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.MemoryBudget = nil // the chart's default budget: 512Mi
	if err := s.c.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	s.eventually(2*time.Minute, "the entries drilled within the default budget", func() (bool, string) {
		live, cond, err := drillCondition()
		if err != nil || cond == nil {
			return false, fmt.Sprintf("condition %v, %v", cond, err)
		}
		empty, restored := false, false
		for _, r := range live.Status.Results {
			empty = empty || r.Entry == entryName && r.Outcome == backupv1alpha1.OutcomeNotRestorable && strings.Contains(r.Reason, "no full snapshot")
			restored = restored || r.Entry == drilledEntry && r.Outcome == backupv1alpha1.OutcomeRestorable && strings.Contains(r.RealRestore, " agrees: ")
		}
		return empty && restored, fmt.Sprintf("%s: %s; results %+v", cond.Reason, cond.Message, live.Status.Results)
	})
	for _, r := range func() []backupv1alpha1.EntryDrillResult { live, _, _ := drillCondition(); return live.Status.Results }() {
		if r.Entry == drilledEntry {
			t.Logf("%s drilled on the node: %s, revision %d, %d keys; %s", r.Entry, r.Outcome, r.RestoredRevision, r.Keys, r.RealRestore)
		}
	}
	if err := s.c.Delete(ctx, rd); err != nil {
		t.Fatal(err)
	}
	s.eventually(time.Minute, "the RestoreDrill gone with its schedule", func() (bool, string) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(rd), &backupv1alpha1.RestoreDrill{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
	s.deleteWithRetention(ctx, drilledEntry, 0)
	s.awaitPurged(ctx, drilledEntry, 2*time.Minute)
}
