package etcdbr_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	copyfn "github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// A fail-over to the copy and back, with etcd-backup-restore following the etcd-backup secret
// as etcd-druid redeploys it: one etcd keeps running (its data a pod's volume) while its
// snapshotter is restarted with the secret of each phase. Backed up into the first store and
// copied to a second S3 bucket; failed over (spec.failOver): the secret names the second
// bucket, etcd-backup-restore backs up into it, nothing is written to the first, and a restore
// through the secret holds every key; returned: what was written to the second bucket is copied
// back, the secret names the first again, etcd-backup-restore goes on there, and a restore from
// it holds every key of the three phases. An entry of another provider type keeps its bucket
// throughout and its BackupEntry says why; its backups, lost from that bucket, are back from the
// copy on the other provider after the return.
func TestFailOverToTheCopy(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("this test runs etcd-backup-restore and the purge as uid %d, as deployed, which needs root; it runs as uid %d", etcdDruidUser, uid)
	}
	f := start(t)
	f.RunFunction(copyfn.Definition, f.providers)
	ctx := context.Background()
	const first, second, other = "etcdbr-first", "etcdbr-second", "etcdbr-first-local"
	// The second bucket is a BackupBucket only for the bucket function to create it: no entry
	// names it and the policy does not select it.
	for _, name := range []string{first, second} {
		f.create(t, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type}, Region: stack.S3Region,
			SecretRef: corev1.SecretReference{Name: "s3-credentials", Namespace: "garden"}}})
		f.waitSucceeded(t, &extensionsv1alpha1.BackupBucket{}, name)
	}
	f.create(t, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: other}, Spec: extensionsv1alpha1.BackupBucketSpec{
		DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: region(local.Type),
		SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"}}})
	f.waitSucceeded(t, &extensionsv1alpha1.BackupBucket{}, other)
	f.create(t, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Spec: backupv1alpha1.BackupDestinationSpec{
		Type: s3.Type, Bucket: second, Endpoint: f.Env.S3.Endpoint, Region: stack.S3Region,
		CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "s3-credentials"}}})

	target := shoot{entry: "shoot--failover--one--0a1b2c3d", namespace: "shoot--failover--one"}
	stays := shoot{entry: "shoot--failover--local--4e5f6a7b", namespace: "shoot--failover--local"}
	for _, s := range []struct {
		shoot
		bucket, provider, region string
	}{{target, first, s3.Type, stack.S3Region}, {stays, other, local.Type, region(local.Type)}} {
		f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}})
		f.create(t, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: s.entry}, Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s.provider}, BucketName: s.bucket, Region: s.region,
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + s.bucket, Namespace: "garden"}}})
		f.waitSucceeded(t, &extensionsv1alpha1.BackupEntry{}, s.entry)
	}
	firstStore := f.bucket(t, s3.Type, target)
	prefix := target.entry + "/"
	staysData := f.secret(t, stays).Data
	// The local entry's backups, which etcd-backup-restore wrote: copied to the S3 copy with the
	// rest, then lost from the local bucket; the return rebuilds them from the copy.
	testenv.BackUpEtcd(t, t.TempDir(), f.localRoot, other, gardener.EtcdMainPrefix(stays.entry))
	localStore := f.bucket(t, local.Type, stays)
	staysPrefix := stays.entry + "/"
	staysObjects := digests(t, localStore, staysPrefix)

	etcd := f.runEtcd(t, target)
	written := map[string]string{}
	f.backUpPhase(t, etcd, target, "first", written)

	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second",
		Annotations: map[string]string{gardener.AnnotationOperation: copyfn.RunNow}},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{first, other}},
			Destination: "second", Schedule: "@every 1h"}}
	f.create(t, policy)
	f.Eventually(60*time.Second, "the entries copied", func() (bool, string) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		return len(policy.Status.Results) == 2 && policy.Status.Failed == 0, fmt.Sprintf("%+v", policy.Status)
	})
	secondStore := f.storeOf(t, s3.Type, second, f.secret(t, target).Data)
	beforeFailOver := keysUnder(t, firstStore, prefix)
	if copied := keysUnder(t, secondStore, prefix); !slices.Equal(copied, beforeFailOver) {
		t.Fatalf("the copy holds %v, the first store %v", copied, beforeFailOver)
	}

	if copied := digests(t, secondStore, staysPrefix); len(staysObjects) == 0 || !maps.Equal(copied, staysObjects) {
		t.Fatalf("the copy holds %v of the local entry, its bucket %v", copied, staysObjects)
	}
	if err := os.RemoveAll(filepath.Join(f.localRoot, other, stays.entry)); err != nil {
		t.Fatal(err)
	}

	// Fail over.
	f.setFailOver(t, policy, true)
	f.Eventually(60*time.Second, "etcd-backup naming the second bucket", func() (bool, string) {
		got := string(f.secret(t, target).Data[entry.DataKeyBucketName])
		return got == second, got
	})
	f.waitPhase(t, policy, backupv1alpha1.FailOverActive)
	f.waitDescription(t, target.entry, "etcd-backup points at BackupDestination second")
	f.waitDescription(t, stays.entry, "keeps the bucket")
	if got := f.secret(t, stays).Data; !equalData(got, staysData) {
		t.Errorf("the local entry's etcd-backup changed on the fail-over to an S3 copy")
	}
	f.backUpPhase(t, etcd, target, "failed-over", written)
	if after := keysUnder(t, firstStore, prefix); !slices.Equal(after, beforeFailOver) {
		t.Errorf("the first store changed during the fail-over: %v, was %v", after, beforeFailOver)
	}
	checkRestored(t, f.restoreIn(t, s3.Type, target, "restore-failed-over"), written)

	// Return.
	inCopy := keysUnder(t, secondStore, prefix)
	f.setFailOver(t, policy, false)
	f.Eventually(90*time.Second, "the return recorded", func() (bool, string) {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(policy.Status.Conditions, backupv1alpha1.ConditionFailedOver)
		return policy.Status.FailOver == nil && c != nil && c.Reason == backupv1alpha1.FailOverReturned, fmt.Sprintf("%+v", policy.Status)
	})
	f.Eventually(60*time.Second, "etcd-backup naming the first bucket again", func() (bool, string) {
		got := string(f.secret(t, target).Data[entry.DataKeyBucketName])
		return got == first, got
	})
	if back := keysUnder(t, firstStore, prefix); !isSubset(inCopy, back) {
		t.Errorf("after the return the first store holds %v, lacking some of the copy's %v", back, inCopy)
	}
	// The local entry, which kept its bucket, has the backups it lost back from the copy on
	// another provider, byte for byte.
	if back := digests(t, localStore, staysPrefix); !maps.Equal(back, staysObjects) {
		t.Errorf("after the return the local bucket holds %v of the lost entry, want %v", back, staysObjects)
	}
	f.backUpPhase(t, etcd, target, "returned", written)
	checkRestored(t, f.restoreIn(t, s3.Type, target, "restore-returned"), written)
	if got := f.secret(t, stays).Data; !equalData(got, staysData) {
		t.Errorf("the local entry's etcd-backup changed on the return")
	}
	if len(f.DeadLetters("copy")) != 0 {
		t.Errorf("dead letters of the copy function: %+v", f.DeadLetters("copy"))
	}
	t.Logf("failed over and back: %d keys restored from the second bucket and then from the first; %d objects before the fail-over, %d in the copy at the return",
		len(written), len(beforeFailOver), len(inCopy))
}

// runEtcd runs the shoot's etcd for the whole test, as its pod's volume outlives the restarts of
// etcd-backup-restore.
func (f *fixture) runEtcd(t *testing.T, s shoot) *stack.Etcd {
	t.Helper()
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(f.dir, s.entry, "etcd", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := f.etcdbr.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	return etcd
}

// backUpPhase runs etcdbrctl snapshot configured from the shoot's etcd-backup secret as it is
// now, writes three keys and waits until a snapshot in the store the secret names holds them.
func (f *fixture) backUpPhase(t *testing.T, etcd *stack.Etcd, s shoot, phase string, written map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(f.dir, s.entry, phase)
	secret := f.secret(t, s)
	store := f.backupStore(t, s3.Type, s, filepath.Join(dir, "credentials"))
	into := f.storeOf(t, s3.Type, string(secret.Data[entry.DataKeyBucketName]), secret.Data)
	opts := snapshotOptions
	opts.TempDir = filepath.Join(dir, "temp")
	snapshotter, err := f.etcdbr.StartSnapshotter(etcd, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer snapshotter.Stop()
	var revision int64
	for i := range 3 {
		key := fmt.Sprintf("%s%s/%s/%d", keyPrefix, s.entry, phase, i)
		value := fmt.Sprintf("value %d of %s", i, phase)
		if revision, err = etcd.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
		written[key] = value
	}
	f.waitSnapshotOfAnyKind(t, into, store.SnapshotPrefix(), revision)
}

// waitSnapshotOfAnyKind waits until a full or delta snapshot under prefix covers revision.
func (f *fixture) waitSnapshotOfAnyKind(t *testing.T, store objectstore.Store, prefix string, revision int64) {
	t.Helper()
	f.Eventually(60*time.Second, fmt.Sprintf("a snapshot under %s up to revision %d", prefix, revision), func() (bool, string) {
		keys := keysUnder(t, store, prefix)
		for _, k := range keys {
			if sn, ok := stack.ParseSnapshot(k); ok && sn.LastRevision >= revision {
				return true, ""
			}
		}
		return false, fmt.Sprint(keys)
	})
}

func (f *fixture) setFailOver(t *testing.T, p *backupv1alpha1.BackupCopyPolicy, on bool) {
	t.Helper()
	patch := client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"spec":{"failOver":%t}}`, on))
	if err := f.Client.Patch(context.Background(), p, patch); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) waitPhase(t *testing.T, p *backupv1alpha1.BackupCopyPolicy, phase string) {
	t.Helper()
	f.Eventually(60*time.Second, "fail-over phase "+phase, func() (bool, string) {
		if err := f.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return false, err.Error()
		}
		return p.Status.FailOver != nil && p.Status.FailOver.Phase == phase, fmt.Sprintf("%+v", p.Status)
	})
}

func (f *fixture) waitDescription(t *testing.T, name, part string) {
	t.Helper()
	f.Eventually(60*time.Second, name+"'s lastOperation saying "+part, func() (bool, string) {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, be); err != nil {
			return false, err.Error()
		}
		op := be.Status.LastOperation
		if op == nil {
			return false, "no lastOperation"
		}
		return strings.Contains(op.Description, part), op.Description
	})
}

func checkRestored(t *testing.T, got, written map[string]string) {
	t.Helper()
	if len(got) != len(written) {
		t.Errorf("restored %d keys, wrote %d", len(got), len(written))
	}
	for k, v := range written {
		if got[k] != v {
			t.Errorf("restored %s = %q, wrote %q", k, got[k], v)
		}
	}
}

func isSubset(sub, of []string) bool {
	for _, k := range sub {
		if !slices.Contains(of, k) {
			return false
		}
	}
	return true
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}
