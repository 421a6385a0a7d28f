package drill_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The whole way, as installed: a RestoreDrill created in the API server is announced by the
// bridge, the schedule function installs its schedule on the NATS server, the server fires it,
// and the drill function, in pull mode on its own consumer and identity, drills the one entry it
// selects — backed up by etcd-backup-restore itself — and writes the status, with nextRun as the
// server announced it.
func TestDrillOnItsSchedule(t *testing.T) {
	p := pipeline.Start(t)
	c, ctx := p.Client, context.Background()
	root := t.TempDir()
	const bucketName, entryName = "drills", "shoot--dev--scheduled--6f1c2d3e-0000-4000-8000-000000000004"
	backUp(t, root, bucketName, gardener.EtcdMainPrefix(entryName))
	stores := objectstore.NewRegistry(local.New(root))
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "entry-credentials"}, Data: map[string][]byte{"token": []byte("local")}},
		&extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: entryName},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "entry-credentials"},
			},
		},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	p.RunFunction(etcdbackup.ScheduleDefinition, stores)
	p.RunFunction(drill.Definition, stores)

	rd := &backupv1alpha1.RestoreDrill{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduled"},
		Spec:       backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "@every 3s"},
	}
	if err := c.Create(ctx, rd); err != nil {
		t.Fatal(err)
	}
	p.Eventually(90*time.Second, "a fired run in the status", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rd), rd); err != nil {
			return false, err.Error()
		}
		st := rd.Status
		cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionDrillsSucceeded)
		return cond != nil && st.LastRun != nil, fmt.Sprintf("%+v", st)
	})
	st := rd.Status
	cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionDrillsSucceeded)
	if cond.Status != metav1.ConditionTrue || cond.Reason != backupv1alpha1.ReasonAllRestorable {
		t.Errorf("condition %+v", cond)
	}
	if st.Entries != 1 || st.Restorable != 1 || len(st.Results) != 1 || st.Results[0].Entry != entryName || st.Results[0].Outcome != backupv1alpha1.OutcomeRestorable {
		t.Errorf("entries %d, restorable %d, results %+v: want %s Restorable", st.Entries, st.Restorable, st.Results, entryName)
	}
	if st.NextRun == nil || !st.NextRun.Time.After(st.LastRun.Time) {
		t.Errorf("nextRun %v after lastRun %v: want the server's next fire", st.NextRun, st.LastRun)
	}
	if len(p.DeadLetters("drill")) != 0 {
		t.Errorf("dead letters of the drill function: %+v", p.DeadLetters("drill"))
	}
}

// backUp runs an etcd with a few keys and etcd-backup-restore's snapshotter (the pinned
// etcdbrctl) saving to the local provider's bucket under prefix until it has taken a full
// snapshot and a delta, as etcd-druid backs up a shoot's etcd-main.
func backUp(t *testing.T, root, bucket, prefix string) {
	t.Helper()
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs, err := os.Create(filepath.Join(dir, "etcdbr.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	br := &stack.EtcdBR{BinDir: binDir, Logs: logs}
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := br.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	ctx := context.Background()
	put := func(i int) {
		t.Helper()
		if _, err := etcd.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "{}"); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	store := &stack.BackupStore{Provider: "Local", Container: bucket, Prefix: prefix, Home: root}
	snapshotter, err := br.StartSnapshotter(etcd, store, stack.SnapshotOptions{
		FullSnapshotSchedule: "0 0 * * *", // only the one taken at start
		DeltaSnapshotPeriod:  time.Second,
		MaxBackups:           7,
		TempDir:              filepath.Join(dir, "snapshotter"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer snapshotter.Stop()
	snapshots := filepath.Join(root, bucket, filepath.FromSlash(store.SnapshotPrefix()))
	taken := func(kind string) func() (bool, string) {
		return func() (bool, string) {
			names, _ := filepath.Glob(filepath.Join(snapshots, kind+"-*"))
			return len(names) > 0, fmt.Sprint(names)
		}
	}
	testenv.Eventually(t, time.Minute, "a full snapshot", taken("Full"))
	put(1)
	testenv.Eventually(t, time.Minute, "a delta snapshot", taken("Incr"))
}
