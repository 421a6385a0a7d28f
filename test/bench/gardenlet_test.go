package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// gardenlet's part, played by the benchmark: the inputs gardenlet prepares before it deploys
// an extension BackupEntry, the BackupBucket and BackupEntries as gardenlet's deployers write
// them (pkg/component/extensions/backup{bucket,entry}), and their deletion as
// pkg/extensions.DeleteExtensionObject does it (confirmation annotation, then delete).

const (
	gardenNamespace = "garden"
	// driverWorkers is how many goroutines create or delete the entries of a burst.
	driverWorkers = 16
)

// phaseObjects are the names of one phase's objects.
type phaseObjects struct {
	bucket  string
	entries []string
}

func newPhaseObjects(phase string, n int) phaseObjects {
	p := phaseObjects{bucket: "bench-" + phase}
	for i := 0; i < n; i++ {
		p.entries = append(p.entries, fmt.Sprintf("shoot--%s--s%d--%s", phase, i, uuid.NewUUID()))
	}
	return p
}

func entrySecretName(entry string) string { return "entry-" + entry }

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// parallel runs f(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		mu       sync.Mutex
		wg       sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// ensureGardenNamespace creates the garden namespace once.
func ensureGardenNamespace(ctx context.Context, c client.Client) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardenNamespace}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createInputs creates what gardenlet has in place before it deploys the phase's objects: the
// bucket's credentials, and per entry its credentials secret in garden and the shoot's
// control-plane namespace annotated with the shoot's uid.
func createInputs(ctx context.Context, c client.Client, p phaseObjects) error {
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + p.bucket, Namespace: gardenNamespace,
			Annotations: map[string]string{v1beta1constants.GardenerTimestamp: now()}},
		Data: map[string][]byte{"token": []byte("bench")},
	}); err != nil && !apierrors.IsAlreadyExists(err) { // entries of a bucket created before
		return fmt.Errorf("bucket credentials: %w", err)
	}
	return parallel(len(p.entries), driverWorkers, func(i int) error {
		name := p.entries[i]
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        gardener.EntryNamespace(name),
			Annotations: map[string]string{v1beta1constants.ShootUID: gardener.EntryShootUID(name)},
		}}); err != nil {
			return fmt.Errorf("shoot namespace of %s: %w", name, err)
		}
		if err := c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: entrySecretName(name), Namespace: gardenNamespace,
				Annotations: map[string]string{v1beta1constants.GardenerTimestamp: now()}},
			Data: map[string][]byte{"token": []byte("bench"), "bucketName": []byte(p.bucket)},
		}); err != nil {
			return fmt.Errorf("credentials of %s: %w", name, err)
		}
		return nil
	})
}

// deleteInputs removes the credentials secrets once the phase is over (the namespaces stay:
// without kube-controller-manager nothing would finalize them).
func deleteInputs(ctx context.Context, c client.Client, p phaseObjects) error {
	if err := client.IgnoreNotFound(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + p.bucket, Namespace: gardenNamespace}})); err != nil {
		return err
	}
	return parallel(len(p.entries), driverWorkers, func(i int) error {
		return client.IgnoreNotFound(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: entrySecretName(p.entries[i]), Namespace: gardenNamespace}}))
	})
}

// deployBucket creates the phase's BackupBucket as gardenlet's deployer does and waits until
// it is Succeeded.
func deployBucket(ctx context.Context, c client.Client, p phaseObjects, timeout time.Duration) error {
	bb := newBucket(p.bucket)
	if err := c.Create(ctx, bb); err != nil {
		return fmt.Errorf("BackupBucket %s: %w", p.bucket, err)
	}
	return poll(timeout, func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bb), bb); err != nil {
			return false, "", err
		}
		op := bb.Status.LastOperation
		if op == nil {
			return false, "no lastOperation", nil
		}
		ok := op.State == gardencorev1beta1.LastOperationStateSucceeded && bb.Status.ObservedGeneration == bb.Generation
		return ok, fmt.Sprintf("%s/%s: %s", op.Type, op.State, op.Description), nil
	})
}

// newBucket is the BackupBucket gardenlet deploys for name, with the credentials bucket-<name>.
func newBucket(name string) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile,
			v1beta1constants.GardenerTimestamp: now(),
		}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			Region:      "local",
			SecretRef:   corev1.SecretReference{Name: "bucket-" + name, Namespace: gardenNamespace},
		},
	}
}

// deleteBucket deletes the phase's BackupBucket as gardenlet does and waits until it is gone.
func deleteBucket(ctx context.Context, c client.Client, p phaseObjects, timeout time.Duration) error {
	bb := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: p.bucket}}
	if err := deleteExtensionObject(ctx, c, bb); err != nil {
		return fmt.Errorf("deleting BackupBucket %s: %w", p.bucket, err)
	}
	return poll(timeout, func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(bb), bb)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		if op := bb.Status.LastOperation; op != nil {
			return false, fmt.Sprintf("%s/%s: %s", op.Type, op.State, op.Description), nil
		}
		return false, "still there", nil
	})
}

// newEntry is the extension BackupEntry gardenlet deploys for entry name.
func newEntry(name, bucket string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile,
			v1beta1constants.GardenerTimestamp: now(),
		}},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			Region:      "local",
			BucketName:  bucket,
			SecretRef:   corev1.SecretReference{Name: entrySecretName(name), Namespace: gardenNamespace},
		},
	}
}

// deleteExtensionObject is gardener's pkg/extensions.DeleteExtensionObject: confirm the
// deletion by annotation, then delete.
func deleteExtensionObject(ctx context.Context, c client.Client, obj client.Object) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(
		`{"metadata":{"annotations":{%q:"true",%q:%q}}}`,
		v1beta1constants.ConfirmationDeletion, v1beta1constants.GardenerTimestamp, now())))
	if err := c.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(c.Delete(ctx, obj))
}

// poll calls f every 100 ms until it reports done, fails or timeout passes; used only for the
// phase's setup and teardown, never for what is measured.
func poll(timeout time.Duration, f func() (bool, string, error)) error {
	return stack.Poll(timeout, 100*time.Millisecond, "the phase's objects", f)
}

// forceCleanup removes a failed phase's objects once its side is stopped: it drops the
// finalizers of its BackupEntries, BackupBucket and credentials and deletes them, and deletes
// the etcd-backup secrets left in its namespaces, so that the next side finds nothing of it.
func forceCleanup(ctx context.Context, e *env, p phaseObjects) error {
	c := e.driver
	unfinalize := func(obj client.Object) error {
		if err := c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			return client.IgnoreNotFound(err)
		}
		return client.IgnoreNotFound(c.Delete(ctx, obj))
	}
	if err := parallel(len(p.entries), driverWorkers, func(i int) error {
		name := p.entries[i]
		if err := unfinalize(&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
		if err := unfinalize(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: entrySecretName(name), Namespace: gardenNamespace}}); err != nil {
			return err
		}
		return unfinalize(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: etcdBackupSecret, Namespace: gardener.EntryNamespace(name)}})
	}); err != nil {
		return err
	}
	if err := unfinalize(&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: p.bucket}}); err != nil {
		return err
	}
	if err := unfinalize(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + p.bucket, Namespace: gardenNamespace}}); err != nil {
		return err
	}
	return unfinalize(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "generated-bucket-" + p.bucket, Namespace: gardenNamespace}})
}
