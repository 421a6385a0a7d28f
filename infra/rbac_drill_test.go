package infra_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The chart's role carries the drill function, as its ServiceAccount, through a fire: it reads
// the RestoreDrill, lists the BackupEntries and EtcdBackupConfigs, opens an entry's bucket with
// its BackupBucket's credentials, a config's BackupDestination with its own, and the entry's
// copy through its BackupCopyPolicy's destination, and writes the status. No prefix holds a
// snapshot, so the one verdict that proves the store was read is NotRestorable (a Forbidden
// answer anywhere is an error or an Error outcome).
func TestRBACIsEnoughForDrills(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	c := serviceAccountClient(t, env, "drill")

	const bucketName, entryName = "drills", "shoot--dev--drilled--6f1c2d3e-0000-4000-8000-000000000003"
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, bucketName), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "bucket-credentials"}, Data: map[string][]byte{"token": []byte("local")}},
		&extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: bucketName},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "bucket-credentials"},
			},
		},
		&extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: entryName},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "bucket-credentials"},
			},
		},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: backupv1alpha1.BackupDestinationSpec{
			Type: local.Type, Bucket: bucketName, CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "bucket-credentials"}}},
		&backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"}, Spec: backupv1alpha1.EtcdBackupConfigSpec{
			Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{"http://127.0.0.1:2379"}}, Schedule: "@daily", Keep: 1, Destination: "local"}},
		&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac-copy"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Names: []string{bucketName}}, Destination: "local", Schedule: "@hourly"}},
		&backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: backupv1alpha1.RestoreDrillSpec{
			All: true, Configs: &backupv1alpha1.ConfigSelection{}, Schedule: "@daily", Source: backupv1alpha1.DrillBoth, CopyPolicy: "rbac-copy"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	rd := &backupv1alpha1.RestoreDrill{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, rd); err != nil {
		t.Fatal(err)
	}

	fn, err := drill.Definition.Build(ctx, runner.Deps{Client: c, Stores: objectstore.NewRegistry(local.New(root)), Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.NewDrillDueEvent("rbac-test", kube.Ref(events.KindRestoreDrill, rd), rd.Spec.Schedule, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := fn.Handler.Handle(ctx, e); err != nil {
		t.Fatalf("the drill function as its ServiceAccount: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, rd); err != nil {
		t.Fatal(err)
	}
	st := rd.Status
	if len(st.Results) != 2 || st.Results[0].Outcome != backupv1alpha1.OutcomeNotRestorable || st.Results[1].Outcome != backupv1alpha1.OutcomeNotRestorable {
		t.Fatalf("results %+v, want %s and team/main NotRestorable (no full snapshot)", st.Results, entryName)
	}
	for _, r := range st.Results {
		if r.Entry == entryName && (r.Copy == nil || r.Copy.Outcome != backupv1alpha1.OutcomeNotRestorable) {
			t.Errorf("%s: the drill of its copy %+v, want NotRestorable (no full snapshot): the policy and its destination read", entryName, r.Copy)
		}
	}
	if cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionDrillsSucceeded); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("condition %+v", cond)
	}
}
