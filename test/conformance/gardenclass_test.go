package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	extensionsbackupentry "github.com/gardener/gardener/pkg/component/extensions/backupentry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// 11-garden-class-entry: the class-garden BackupEntry gardener-operator deploys for the virtual
// garden's etcd (garden--<garden uid>, its etcd-backup in the garden namespace) is reconciled
// and, when deleted, purged inside its own prefix: the garden's snapshots under
// garden--<uid>/virtual-garden-etcd-main/ go, another garden's and the bucket root's stay.
func (r *run) gardenClassEntry(t *testing.T) {
	ctx := context.Background()
	s := r.dst
	bucket := r.bucketB.name
	gardenUID := string(uuid.NewUUID())
	name := "garden--" + gardenUID
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "virtual-garden-etcd-main-backup", Namespace: "garden"}}
	if err := s.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// As gardener-operator's newEtcdMainBackupEntry builds it.
	deployer := extensionsbackupentry.New(r.log, s.client, clock.RealClock{}, &extensionsbackupentry.Values{
		Name:       name,
		Type:       "local",
		Class:      new(extensionsv1alpha1.ExtensionClassGarden),
		Region:     "local",
		SecretRef:  corev1.SecretReference{Name: secret.Name, Namespace: secret.Namespace},
		BucketName: bucket,
	}, time.Second, 30*time.Second, waitTimeout)
	if err := deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := deployer.Wait(ctx); err != nil {
		t.Fatalf("class-garden BackupEntry %s: %v", name, err)
	}
	etcdBackup := &corev1.Secret{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "etcd-backup"}, etcdBackup); err != nil {
		t.Fatalf("the garden's etcd-backup: %v", err)
	}
	if got := string(etcdBackup.Data["bucketName"]); got != bucket {
		t.Errorf("garden/etcd-backup bucketName %q, want %q", got, bucket)
	}

	// The garden's snapshots, another garden's, and one at the bucket root.
	files := map[string]bool{ // path in the bucket → purged
		name + "/virtual-garden-etcd-main/v2/Full-00000000-00000001-1":                                true,
		name + "/virtual-garden-etcd-main/v2/Incr-00000001-00000002-2":                                true,
		"garden--" + string(uuid.NewUUID()) + "/virtual-garden-etcd-main/v2/Full-00000000-00000001-1": false,
		"virtual-garden-etcd-main/v2/Full-00000000-00000001-1":                                        false,
		name + "0/virtual-garden-etcd-main/v2/Full-00000000-00000001-1":                               false,
	}
	for f := range files {
		path := filepath.Join(r.root, bucket, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("snapshot"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := deployer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := deployer.WaitCleanup(wctx); err != nil {
		t.Fatalf("class-garden BackupEntry %s not deleted: %v", name, err)
	}
	var left []string
	for f, purged := range files {
		_, err := os.Stat(filepath.Join(r.root, bucket, f))
		switch {
		case purged && err == nil:
			t.Errorf("%s is still there after the purge of %s/", f, name)
		case !purged && err != nil:
			t.Errorf("%s, outside %s/, is gone: %v", f, name, err)
		case !purged:
			left = append(left, f)
		}
	}
	slices.Sort(left)
	t.Logf("purge of %s/ in %s: left %s", name, bucket, fmt.Sprint(left))
}
