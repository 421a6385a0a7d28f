package copy_test

import (
	"context"
	"fmt"
	"maps"
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
	copyfn "github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The whole way, as installed and secured (TLS, each component a JWT identity with the rights
// `housekeeper nats-auth` issues): a BackupCopyPolicy created in the API server is announced by
// the bridge, the schedule function installs its schedule on the NATS server, the server fires
// it, and the copy function, in pull mode on its own consumer and identity, copies what
// etcd-backup-restore itself wrote for an entry into the destination, byte for byte, and writes
// the status with nextRun as the server announced it.
func TestCopyOnItsSchedule(t *testing.T) {
	p := pipeline.StartSecure(t, natsconn.FormJWT)
	c, ctx := p.Client, context.Background()
	root := t.TempDir()
	const bucketName, entryName = "shoots", "shoot--dev--scheduled--6f1c2d3e-0000-4000-8000-000000000005"
	testenv.BackUpEtcd(t, t.TempDir(), root, bucketName, gardener.EtcdMainPrefix(entryName))
	if err := os.MkdirAll(filepath.Join(root, "copies"), 0o700); err != nil {
		t.Fatal(err)
	}
	stores := objectstore.NewRegistry(local.New(root))
	credentials := corev1.SecretReference{Namespace: "garden", Name: "local-credentials"}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: credentials.Name}, Data: map[string][]byte{"token": []byte("local")}},
		&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local", SecretRef: credentials}},
		&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName}, Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName, Region: "local", SecretRef: credentials}},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "copies"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: "copies"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	p.RunFunction(etcdbackup.ScheduleDefinition, stores)
	p.RunFunction(copyfn.Definition, stores)

	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scheduled"},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{bucketName}},
			Destination: "copies", Schedule: "@every 3s"}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	p.Eventually(60*time.Second, "a fired run in the status", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		return meta.FindStatusCondition(policy.Status.Conditions, backupv1alpha1.ConditionCopiesSucceeded) != nil, fmt.Sprintf("%+v", policy.Status)
	})
	st := policy.Status
	if cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionCopiesSucceeded); cond.Status != metav1.ConditionTrue ||
		cond.Reason != backupv1alpha1.ReasonAllCopied {
		t.Errorf("condition %+v", cond)
	}
	if st.Entries != 1 || len(st.Results) != 1 || !st.Results[0].Complete || st.Results[0].Objects == 0 {
		t.Errorf("entries %d, results %+v: want %s wholly copied", st.Entries, st.Results, entryName)
	}
	if st.NextRun == nil || !st.NextRun.Time.After(st.LastRun.Time) {
		t.Errorf("nextRun %v after lastRun %v: want the server's next fire", st.NextRun, st.LastRun)
	}
	if src, dst := treeDigest(t, filepath.Join(root, bucketName)), treeDigest(t, filepath.Join(root, "copies")); len(src) == 0 || !maps.Equal(src, dst) {
		t.Errorf("the copy holds %v, the bucket %v", dst, src)
	}
	if len(p.DeadLetters("copy")) != 0 {
		t.Errorf("dead letters of the copy function: %+v", p.DeadLetters("copy"))
	}
	if refused := p.RefusedByNATS(); refused != "" {
		t.Errorf("nats-server refused operations of housekeeper's own components:\n%s", refused)
	}
}
