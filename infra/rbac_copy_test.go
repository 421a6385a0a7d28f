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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	copyfn "github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The chart's role carries the copy function, as its ServiceAccount, through a run on demand:
// it reads the BackupCopyPolicy, lists the BackupBuckets and BackupEntries, opens the entry's
// bucket with its BackupBucket's credentials and the BackupDestination with its own, writes
// the status and removes the annotation that asked for the run. The one object under the
// entry's prefix is in the copy afterwards (a Forbidden answer anywhere is an error or an
// incomplete copy).
func TestRBACIsEnoughForCopies(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	c := serviceAccountClient(t, env, "copy")

	const bucketName, entryName = "shoots", "shoot--dev--copied--6f1c2d3e-0000-4000-8000-000000000004"
	const key = entryName + "/etcd-main/v2/Full-00000000-00000001-1764400000.gz"
	root := t.TempDir()
	for _, dir := range []string{filepath.Join(root, bucketName, entryName, "etcd-main", "v2"), filepath.Join(root, "copies")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, bucketName, filepath.FromSlash(key)), []byte("a snapshot"), 0o600); err != nil {
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
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "copies"}, Spec: backupv1alpha1.BackupDestinationSpec{
			Type: local.Type, Bucket: "copies", CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "bucket-credentials"}}},
		&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac",
			Annotations: map[string]string{gardener.AnnotationOperation: copyfn.RunNow}}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Types: []string{local.Type}}, Destination: "copies", Schedule: "@daily"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	policy := &backupv1alpha1.BackupCopyPolicy{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, policy); err != nil {
		t.Fatal(err)
	}

	fn, err := copyfn.Definition.Build(ctx, runner.Deps{Client: c, Stores: objectstore.NewRegistry(local.New(root)), Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.NewObjectEvent("rbac-test", events.OpUpdated, kube.Ref(events.KindBackupCopyPolicy, policy), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := fn.Handler.Handle(ctx, e); err != nil {
		t.Fatalf("the copy function as its ServiceAccount: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, policy); err != nil {
		t.Fatal(err)
	}
	if st := policy.Status; len(st.Results) != 1 || !st.Results[0].Complete || st.Results[0].Objects != 1 {
		t.Fatalf("results %+v, want %s wholly copied, one object", st.Results, entryName)
	}
	if _, ok := policy.Annotations[gardener.AnnotationOperation]; ok {
		t.Errorf("the run-now annotation is left: %v", policy.Annotations)
	}
	if b, err := os.ReadFile(filepath.Join(root, "copies", filepath.FromSlash(key))); err != nil || string(b) != "a snapshot" {
		t.Errorf("the copy holds %q (%v)", b, err)
	}
}
