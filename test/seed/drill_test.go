package seed

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
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
	s.drillByHand(ctx, drilledEntry)
	s.deleteWithRetention(ctx, drilledEntry, 0)
	s.awaitPurged(ctx, drilledEntry, 2*time.Minute)
}

// drillByHand runs infra/docs/operating.md's drill in a seed as written, with this seed's image
// and entry in place of the document's, and one addition: the local provider's bucket directory,
// mounted as the chart mounts it for the drill function (a seed's object stores are reached over
// the network and need none). The pod drills the entry with the drill function's ServiceAccount,
// through the release's network policies, and its log says restorable; the pod is gone after.
func (s *seed) drillByHand(ctx context.Context, entry string) {
	t := s.t
	const (
		docImage     = "ghcr.io/housekeeper-dev/housekeeper:v0.1.0"
		docEntry     = "shoot--dev--app--4c5e1"
		docOverrides = `{"spec": {"serviceAccountName": "housekeeper-drill"}}`
	)
	script := s.operatingBlock("run housekeeper-drill-cli")
	for _, want := range []string{docImage, docEntry, docOverrides} {
		if !strings.Contains(script, want) {
			t.Fatalf("infra/docs/operating.md's drill in a seed does not hold %s: %q", want, script)
		}
	}
	local := fmt.Sprintf(`{"spec": {"serviceAccountName": "housekeeper-drill",
  "volumes": [{"name": "local-buckets", "hostPath": {"path": %q}}],
  "containers": [{"name": "housekeeper-drill-cli", "env": [{"name": "HOUSEKEEPER_LOCAL_ROOT", "value": "/var/lib/housekeeper/buckets"}],
    "volumeMounts": [{"name": "local-buckets", "mountPath": "/var/lib/housekeeper/buckets", "readOnly": true}]}]}}`, s.root)
	script = strings.NewReplacer(docImage, s.image(), docEntry, entry, docOverrides, local).Replace(script)
	start := time.Now()
	out, err := s.kubectlScript(ctx, t.TempDir(), script)
	if err != nil {
		t.Fatalf("infra/docs/operating.md's drill in a seed: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m): restorable$`).Match(out) || !strings.Contains(string(out), entry) {
		t.Fatalf("the drill in a seed did not find %s restorable:\n%s", entry, out)
	}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: hkNamespace, Name: "housekeeper-drill-cli"}, &corev1.Pod{}); err == nil {
		t.Errorf("the drill's pod is still there after the document's commands")
	}
	t.Logf("infra/docs/operating.md's drill in a seed drilled %s in %s:\n%s", entry, time.Since(start).Round(time.Millisecond), out)
}
