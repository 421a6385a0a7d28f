package drill_test

import (
	"context"
	"fmt"
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
	testenv.BackUpEtcd(t, t.TempDir(), root, bucketName, gardener.EtcdMainPrefix(entryName))
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
