package entry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// These tests follow Gardener's extension contract where gardenlet relies on it: control-plane
// migration, source- entries, and the shoot's namespace.

func (f *fixture) entry(name string) *extensionsv1alpha1.BackupEntry {
	f.T.Helper()
	e := &extensionsv1alpha1.BackupEntry{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, e); err != nil {
		f.T.Fatal(err)
	}
	return e
}

func (f *fixture) patchEntry(name string, mutate func(*extensionsv1alpha1.BackupEntry)) *extensionsv1alpha1.BackupEntry {
	f.T.Helper()
	e := f.entry(name)
	base := e.DeepCopy()
	mutate(e)
	if err := f.Client.Patch(context.Background(), e, client.MergeFrom(base)); err != nil {
		f.T.Fatal(err)
	}
	return e
}

// After Migrate succeeded, the entry is left alone: the removal of the migrate annotation
// adds no finalizer back, etcd-backup stays (etcd keeps backing up until the control plane
// moved), and gardenlet deleting the migrated object later purges nothing — even when an
// older housekeeper left a finalizer on it.
func TestMigratedEntryKeepsItsBackups(t *testing.T) {
	f := start(t, false)
	ctx := context.Background()
	const name = "shoot--dev--mig--7a1b"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--mig"}})
	f.create(newEntry(name, nil))
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	backups := snapshots(name+"/", 12)
	f.upload(backups...)

	f.patchEntry(name, func(e *extensionsv1alpha1.BackupEntry) {
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, gardener.AnnotationOperation, gardener.OperationMigrate)
	})
	var migrated *extensionsv1alpha1.BackupEntry
	f.Eventually(30*time.Second, "Migrate Succeeded, annotation and finalizer gone", func() (bool, string) {
		migrated = &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(migrated, name)
		_, annotated := migrated.Annotations[gardener.AnnotationOperation]
		return gardener.IsMigrated(migrated) && !annotated && len(migrated.Finalizers) == 0, s + fmt.Sprintf(" finalizers %v", migrated.Finalizers)
	})
	// Once the entry function has handled the migrate event and every event after it (the
	// finalizer's removal; the annotation's removal, its own write, is no event), the object
	// must still be without finalizer.
	f.Drained(entry.Definition.Name)
	if e := f.entry(name); len(e.Finalizers) != 0 || !gardener.IsMigrated(e) {
		t.Fatalf("after the migrate annotation's removal: finalizers %v, lastOperation %+v", e.Finalizers, e.Status.LastOperation)
	}
	secret := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--mig", Name: entry.SecretName}, secret); err != nil {
		t.Errorf("etcd-backup after Migrate: %v; etcd still needs it", err)
	}

	// A finalizer an older housekeeper left behind (adding one is no event), then gardenlet
	// deletes the object.
	stale := f.patchEntry(name, func(e *extensionsv1alpha1.BackupEntry) { controllerutil.AddFinalizer(e, entry.Finalizer) })
	f.delete(stale)
	f.waitGone(name)
	if left := f.list(name + "/"); len(left) != len(backups) {
		t.Errorf("deleting the migrated entry purged %d of its %d backups", len(backups)-len(left), len(backups))
	}
}

// A migration's source- entry on the destination seed names the source seed's bucket, which
// has no BackupBucket object here: it is purged at once (whatever retention it says) with its
// own spec.secretRef, exactly under its prefix; the same prefix in this seed's bucket, the
// migrated shoot's live backups, is not touched.
func TestSourceEntryIsPurgedWithItsOwnCredentials(t *testing.T) {
	f := start(t, false)
	ctx := context.Background()
	const (
		sourceBucket = "source-seed-backups"
		live         = "shoot--dev--moved--3c4d"
		name         = gardener.SourcePrefix + live
	)
	if _, err := f.blobs.CreateContainer(ctx, sourceBucket, nil); err != nil {
		t.Fatal(err)
	}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--moved"}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "entry-" + name, Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(f.Env.Azurite.Endpoint),
	}})
	source := newEntry(name, map[string]string{entry.AnnotationRetention: "240h"})
	source.Spec.BucketName = sourceBucket
	source.Spec.SecretRef = corev1.SecretReference{Name: "entry-" + name, Namespace: "garden"}
	f.create(source)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)

	copied := snapshots(live+"/", 15) // in this seed's bucket: the destination's live backups
	f.upload(copied...)
	inSource := snapshots(live+"/", 25)
	neighbours := snapshots(live+"0/", 5)
	for _, k := range slices.Concat(inSource, neighbours) {
		if _, err := f.blobs.UploadBuffer(ctx, sourceBucket, k, []byte("snapshot"), nil); err != nil {
			t.Fatal(err)
		}
	}

	f.delete(source)
	f.waitGone(name)
	if left := listIn(t, f.blobs, sourceBucket, live+"/"); len(left) != 0 {
		t.Errorf("%d of the source bucket's %d backups under %s/ left", len(left), len(inSource), live)
	}
	if left := listIn(t, f.blobs, sourceBucket, live+"0/"); len(left) != len(neighbours) {
		t.Errorf("%d of %d neighbours in the source bucket left", len(left), len(neighbours))
	}
	if left := f.list(live + "/"); len(left) != len(copied) {
		t.Errorf("%d of the destination's %d live backups left", len(left), len(copied))
	}
}

// Were a source- entry to name the bucket its live namesake uses, purging it would delete the
// migrated shoot's backups: it is released without a purge.
func TestSourceEntryNeverPurgesALiveEntrysBackups(t *testing.T) {
	f := start(t, false)
	const live = "shoot--dev--same--5e6f"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--same"}})
	f.create(newEntry(live, nil))
	f.create(newEntry(gardener.SourcePrefix+live, nil))
	f.waitState(&extensionsv1alpha1.BackupEntry{}, live, gardencorev1beta1.LastOperationStateSucceeded)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, gardener.SourcePrefix+live, gardencorev1beta1.LastOperationStateSucceeded)
	backups := snapshots(live+"/", 20)
	f.upload(backups...)

	f.delete(f.entry(gardener.SourcePrefix + live))
	f.waitGone(gardener.SourcePrefix + live)
	if left := f.list(live + "/"); len(left) != len(backups) {
		t.Errorf("the source entry's deletion purged %d of the live entry's %d backups", len(backups)-len(left), len(backups))
	}
}

// An older entry of a re-created shoot neither overwrites nor deletes the etcd-backup secret in
// the namespace that now belongs to the new shoot (shoot.gardener.cloud/uid).
func TestEntryLeavesAnotherShootsNamespaceAlone(t *testing.T) {
	f := start(t, false)
	ctx := context.Background()
	const (
		ns       = "shoot--dev--re"
		newer    = ns + "--b2"
		older    = ns + "--a1"
		stranger = "stale-label"
	)
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{gardener.ShootUIDAnnotation: "b2"}}})
	// A stale etcd-backup with metadata nobody wants any more.
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: entry.SecretName, Namespace: ns,
		Labels: map[string]string{stranger: "x"}, Annotations: map[string]string{stranger: "y"}}})
	f.create(newEntry(newer, nil))
	f.waitState(&extensionsv1alpha1.BackupEntry{}, newer, gardencorev1beta1.LastOperationStateSucceeded)
	secret := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: entry.SecretName}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Annotations[entry.AnnotationCreatedBy] != newer || secret.Labels[stranger] != "" || secret.Annotations[stranger] != "" {
		t.Fatalf("etcd-backup metadata: labels %v, annotations %v; want exactly housekeeper's", secret.Labels, secret.Annotations)
	}

	f.create(newEntry(older, map[string]string{entry.AnnotationForceDeletion: "true"}))
	f.Eventually(30*time.Second, "the older entry Succeeded, saying the namespace is another shoot's", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(e, older)
		op := e.Status.LastOperation
		return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded && e.Status.LastError == nil &&
			strings.Contains(op.Description, "belongs to shoot b2"), s
	})
	after := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: entry.SecretName}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != secret.ResourceVersion || after.Annotations[entry.AnnotationCreatedBy] != newer {
		t.Errorf("the older entry rewrote the newer shoot's etcd-backup (created-by %q)", after.Annotations[entry.AnnotationCreatedBy])
	}

	// The older entry goes; the newer shoot's secret stays, even without created-by.
	base := after.DeepCopy()
	delete(after.Annotations, entry.AnnotationCreatedBy)
	if err := f.Client.Patch(ctx, after, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.delete(f.entry(older))
	f.waitGone(older)
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: entry.SecretName}, &corev1.Secret{}); err != nil {
		t.Errorf("the newer shoot's etcd-backup after the older entry's deletion: %v", err)
	}
}

// A terminating namespace: Succeeded with a description, no lastError, no retry loop on the
// API server's Forbidden.
func TestEntryInATerminatingNamespace(t *testing.T) {
	f := start(t, true)
	ctx := context.Background()
	const ns = "shoot--dev--going"
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	f.create(namespace)
	// kube-apiserver alone runs no namespace controller: the namespace stays Terminating.
	if err := f.Client.Delete(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	created := newEntry(ns+"--9f", nil)
	f.create(created)
	f.Eventually(30*time.Second, "Succeeded saying the namespace is terminating", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(e, ns+"--9f")
		op := e.Status.LastOperation
		return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded && e.Status.LastError == nil &&
			strings.Contains(op.Description, "is terminating"), s
	})
	f.Handled(entry.Definition.Name, events.TypeEntryCreated, created)
	if dls := f.DeadLetters(entry.Definition.Name); len(dls) != 0 {
		t.Errorf("dead letters: %+v", dls)
	}
}

func listIn(t testing.TB, blobs *azblob.Client, container, prefix string) []string {
	t.Helper()
	var keys []string
	pager := blobs.NewListBlobsFlatPager(container, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			keys = append(keys, *b.Name)
		}
	}
	return keys
}

// Restore: the restore annotation is removed only after Succeeded was written, as upstream
// does, so gardenlet never sees the annotation gone while the restore is unfinished. Every
// version of the object is watched.
func TestRestoreAnnotationRemovedAfterSucceeded(t *testing.T) {
	f := start(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const name = "shoot--dev--back--4d5e"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--back"}})
	f.create(newEntry(name, nil))
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)

	wc, err := client.NewWithWatch(f.Env.Kube.Config, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	annotated := f.patchEntry(name, func(e *extensionsv1alpha1.BackupEntry) {
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, gardener.AnnotationOperation, gardener.OperationRestore)
	})
	w, err := wc.Watch(ctx, &extensionsv1alpha1.BackupEntryList{}, client.MatchingFields{"metadata.name": name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: annotated.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var seen []string
	for ev := range w.ResultChan() {
		e, ok := ev.Object.(*extensionsv1alpha1.BackupEntry)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		op := e.Status.LastOperation
		_, stillAnnotated := e.Annotations[gardener.AnnotationOperation]
		seen = append(seen, fmt.Sprintf("annotated=%t %s/%s", stillAnnotated, op.Type, op.State))
		if stillAnnotated {
			continue
		}
		if op.Type != gardencorev1beta1.LastOperationTypeRestore || op.State != gardencorev1beta1.LastOperationStateSucceeded {
			t.Fatalf("restore annotation removed while lastOperation is %s/%s; versions seen: %v", op.Type, op.State, seen)
		}
		return
	}
	t.Fatalf("the watch ended before the restore annotation was removed; versions seen: %v", seen)
}
