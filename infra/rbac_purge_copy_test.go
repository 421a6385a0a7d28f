package infra_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The chart's role carries the purge function, as its ServiceAccount, through the purge of an
// entry a BackupCopyPolicy copies: it reads the entry and its BackupBucket, lists the policies,
// opens their BackupDestination with its credentials, purges the entry's prefix in the copy and
// in the bucket, and releases the entry (a Forbidden answer anywhere fails the purge, and the
// entry stays).
func TestRBACIsEnoughForPurgingCopies(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	c := serviceAccountClient(t, env, entry.PurgeDefinition.Name)

	const bucketName, entryName = "shoots", "shoot--dev--purged--6f1c2d3e-0000-4000-8000-000000000005"
	const key = entryName + "/etcd-main/v2/Full-00000000-00000001-1764400000.gz"
	root := t.TempDir()
	for _, bucket := range []string{bucketName, "copies"} {
		if err := os.MkdirAll(filepath.Join(root, bucket, entryName, "etcd-main", "v2"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, bucket, filepath.FromSlash(key)), []byte("a snapshot"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "bucket-credentials"}, Data: map[string][]byte{"token": []byte("local")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "copy-credentials"}, Data: map[string][]byte{"token": []byte("local")}},
		&extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: bucketName},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "bucket-credentials"},
			},
		},
		&extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: entryName, Finalizers: []string{entry.Finalizer}, Annotations: map[string]string{entry.AnnotationRetention: "0s"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "bucket-credentials"},
			},
		},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "copies"}, Spec: backupv1alpha1.BackupDestinationSpec{
			Type: local.Type, Bucket: "copies", CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "copy-credentials"}}},
		&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Types: []string{local.Type}}, Destination: "copies", Schedule: "@daily"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	be := &extensionsv1alpha1.BackupEntry{}
	if err := admin.Get(ctx, client.ObjectKey{Name: entryName}, be); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, be); err != nil {
		t.Fatal(err)
	}

	fn, err := entry.PurgeDefinition.Build(ctx, runner.Deps{Client: c, JetStream: noJetStream{}, Stores: objectstore.NewRegistry(local.New(root)),
		Cluster: "rbac-test", Log: zaptest.NewLogger(t)}, gardener.ScopeArgs(entry.PurgeDefinition, local.Type)...)
	if err != nil {
		t.Fatal(err)
	}
	data := events.PurgeData{Entry: entryName, UID: string(be.UID), BucketName: bucketName, Prefix: gardener.EntryPrefix(entryName), DueAt: time.Now()}
	e, err := events.NewPurgeEvent("rbac-test", events.OpPurgeDue, kube.Ref(events.KindBackupEntry, be), data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := fn.Handler.Handle(ctx, e); err != nil {
		t.Fatalf("the purge function as its ServiceAccount: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: entryName}, be); !apierrors.IsNotFound(err) {
		t.Errorf("the entry is not released: %v (finalizers %q)", err, be.Finalizers)
	}
	for _, bucket := range []string{bucketName, "copies"} {
		if _, err := os.Stat(filepath.Join(root, bucket, filepath.FromSlash(key))); !os.IsNotExist(err) {
			t.Errorf("%s still holds %s: %v", bucket, key, err)
		}
	}
}

// noJetStream publishes nothing: the purge's outcome event is an audit record, lost with a
// warning, not the work.
type noJetStream struct{ jetstream.JetStream }

func (noJetStream) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return nil, errors.New("no NATS in this test")
}
