package gardener

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	hkruntime "github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// Actuator does the provider work for one kind; the Reconciler owns the protocol around it.
// Both methods must be idempotent.
type Actuator interface {
	// Reconcile converges the object (Create, Reconcile and Restore).
	Reconcile(ctx context.Context, obj extensionsv1alpha1.Object) (Reconciliation, error)
	// Delete cleans up after the object.
	Delete(ctx context.Context, obj extensionsv1alpha1.Object) (Deletion, error)
}

// Reconciliation says how a Reconcile ended when it succeeded.
type Reconciliation struct {
	// Description replaces the default success description, for work that succeeded but waits
	// on something outside the extension's control (a shoot namespace not there yet). It is
	// not an error: gardenlet turns a lastError into a failed shoot operation.
	Description string
}

// Deletion says how far a Delete got.
type Deletion struct {
	// Pending means cleanup is scheduled for later: the finalizers stay, lastOperation becomes
	// Delete/Pending with Description, and whoever finishes the cleanup calls RemoveFinalizers.
	Pending     bool
	Description string
}

// Reconciler is Gardener's extension protocol, written once: finalizers on the object and on
// its spec.secretRef secret, the operation annotation, and lastOperation, lastError and
// observedGeneration exactly as upstream writes them. It is a runtime.Handler.
type Reconciler struct {
	Client    client.Client
	Kind      events.Kind
	NewObject func() extensionsv1alpha1.Object
	// SecretRef returns the object's spec.secretRef.
	SecretRef func(extensionsv1alpha1.Object) corev1.SecretReference
	// NewList returns an empty list of the kind, to find the other objects sharing a secret.
	NewList   func() client.ObjectList
	Finalizer string
	// Migrates says the kind takes part in control-plane migration (BackupEntry). For a kind
	// that does not (BackupBucket), a migrate annotation is reconciled like any other change.
	Migrates bool
	Actuator Actuator
	Log      *zap.Logger
	// Now is the clock (tests set it).
	Now func() time.Time
}

// Handle re-reads the object the event names and converges it.
func (r *Reconciler) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return hkruntime.Permanent(err)
	}
	if ref.Kind != r.Kind {
		return hkruntime.Permanentf("event about a %s reached the %s function", ref.Kind, r.Kind)
	}
	obj := r.NewObject()
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Log.Debug("object is gone, nothing to do", zap.String("name", ref.Name))
			return nil
		}
		return fmt.Errorf("reading %s %s: %w", r.Kind, ref.Name, err)
	}
	return r.Reconcile(ctx, obj)
}

// Reconcile converges obj, which was just read.
func (r *Reconciler) Reconcile(ctx context.Context, obj extensionsv1alpha1.Object) error {
	log := r.Log.With(zap.String("kind", string(r.Kind)), zap.String("name", obj.GetName()))
	if obj.GetAnnotations()[AnnotationOperation] == OperationWaitForState {
		log.Info("operation annotation says wait-for-state: doing nothing")
		return nil
	}
	t := r.operationType(obj)
	if r.Migrates && ShouldSkipOperation(obj, t) {
		return r.migratedAway(ctx, log, obj)
	}
	switch t {
	case gardencorev1beta1.LastOperationTypeMigrate:
		return r.migrate(ctx, log, obj)
	case gardencorev1beta1.LastOperationTypeDelete:
		return r.delete(ctx, log, obj)
	default:
		return r.reconcile(ctx, log, obj, t)
	}
}

// operationType is OperationType for this kind: a kind that does not migrate has no Migrate.
func (r *Reconciler) operationType(obj extensionsv1alpha1.Object) gardencorev1beta1.LastOperationType {
	t := OperationType(obj)
	switch {
	case r.Migrates || t != gardencorev1beta1.LastOperationTypeMigrate:
		return t
	case obj.GetDeletionTimestamp() != nil:
		return gardencorev1beta1.LastOperationTypeDelete
	default:
		return gardencorev1beta1.LastOperationTypeReconcile
	}
}

// migratedAway handles an object whose migration succeeded: the destination seed owns its
// backups now, so nothing here may add a finalizer, write a secret or purge. A deletion only
// releases a finalizer left behind (by an older housekeeper), without any cleanup.
func (r *Reconciler) migratedAway(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object) error {
	if obj.GetDeletionTimestamp() == nil || !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		log.Debug("migrated away: nothing to do")
		return nil
	}
	log.Info("migrated object deleted: releasing it without cleanup; the destination seed owns its backups")
	return r.RemoveFinalizers(ctx, obj)
}

func (r *Reconciler) reconcile(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType) error {
	operation := obj.GetAnnotations()[AnnotationOperation]
	last := obj.GetExtensionStatus().GetLastOperation()
	// Already done for this generation: do the (idempotent) work to repair drift, but write
	// nothing unless the outcome changed, so a duplicated or replayed event changes nothing.
	converged := operation == "" && t == gardencorev1beta1.LastOperationTypeReconcile &&
		last != nil && last.State == gardencorev1beta1.LastOperationStateSucceeded &&
		obj.GetExtensionStatus().GetObservedGeneration() == obj.GetGeneration()

	if err := r.ensureFinalizers(ctx, obj); err != nil {
		return r.Fail(ctx, obj, t, err)
	}
	if operation == OperationReconcile { // removed before the work, as upstream does
		if err := r.removeAnnotation(ctx, obj); err != nil {
			return err
		}
	}
	if !converged {
		if err := r.patchStatus(ctx, obj, func() { setProcessing(obj, t, fmt.Sprintf("%s %s", verb(t), r.Kind), r.Now()) }); err != nil {
			return err
		}
	}
	result, err := r.Actuator.Reconcile(ctx, obj)
	if err != nil {
		return r.Fail(ctx, obj, t, err)
	}
	description := result.Description
	if description == "" {
		description = fmt.Sprintf("%s %s", r.Kind, pastVerb(t))
	}
	if !converged || last.Description != description {
		log.Info("succeeded", zap.String("operation", string(t)), zap.String("description", description))
		if err := r.patchStatus(ctx, obj, func() { setSucceeded(obj, t, description, r.Now()) }); err != nil {
			return err
		}
	}
	if operation == OperationRestore { // removed after Succeeded is written, as upstream does
		return r.removeAnnotation(ctx, obj)
	}
	return nil
}

func (r *Reconciler) delete(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object) error {
	if !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		return nil // never ours, or already released
	}
	t := gardencorev1beta1.LastOperationTypeDelete
	if last := obj.GetExtensionStatus().GetLastOperation(); last == nil || last.Type != t {
		if err := r.patchStatus(ctx, obj, func() { setProcessing(obj, t, "Deleting "+string(r.Kind), r.Now()) }); err != nil {
			return err
		}
	}
	d, err := r.Actuator.Delete(ctx, obj)
	if err != nil {
		return r.Fail(ctx, obj, t, err)
	}
	if d.Pending {
		last := obj.GetExtensionStatus().GetLastOperation()
		if last != nil && last.State == gardencorev1beta1.LastOperationStatePending && last.Description == d.Description {
			return nil // nothing new to say
		}
		log.Info("deletion pending", zap.String("description", d.Description))
		return r.patchStatus(ctx, obj, func() { setPending(obj, t, 1, d.Description, r.Now()) })
	}
	log.Info("deleted, releasing finalizers")
	return r.RemoveFinalizers(ctx, obj)
}

// migrate lets go of the object: the destination seed takes over. Nothing is cleaned up (etcd
// keeps backing up into the bucket until the control plane has moved); the finalizers go, so
// that gardenlet can delete the object without the extension purging anything.
func (r *Reconciler) migrate(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object) error {
	t := gardencorev1beta1.LastOperationTypeMigrate
	if err := r.patchStatus(ctx, obj, func() { setProcessing(obj, t, "Migrating "+string(r.Kind), r.Now()) }); err != nil {
		return err
	}
	if err := r.patchStatus(ctx, obj, func() { setSucceeded(obj, t, string(r.Kind)+" migrated", r.Now()) }); err != nil {
		return err
	}
	if err := r.RemoveFinalizers(ctx, obj); err != nil {
		return err
	}
	log.Info("migrated")
	return r.removeAnnotation(ctx, obj)
}

// Fail records err in the status — lastOperation Error, lastError with its codes — and
// returns it for the runtime to retry or dead-letter.
func (r *Reconciler) Fail(ctx context.Context, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, err error) error {
	description := err.Error()
	codes := hkruntime.CodesOf(err)
	r.Log.Warn("failed", zap.String("kind", string(r.Kind)), zap.String("name", obj.GetName()),
		zap.String("operation", string(t)), zap.Error(err), zap.Any("codes", codes))
	if patchErr := r.patchStatus(ctx, obj, func() {
		setError(obj, t, gardencorev1beta1.LastOperationStateError, description, codes, r.Now())
	}); patchErr != nil {
		return errors.Join(err, patchErr)
	}
	return err
}

// Progress records how far a long operation got: lastOperation Processing at progress.
func (r *Reconciler) Progress(ctx context.Context, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, progress int32, description string) error {
	return r.patchStatus(ctx, obj, func() {
		setLastOperation(obj, t, gardencorev1beta1.LastOperationStateProcessing, progress, description, r.Now())
	})
}

// RemoveFinalizers releases the object: first its spec.secretRef secret (re-read, since
// gardenlet patches it during deletion) unless another object of the kind still uses it,
// then the object itself.
func (r *Reconciler) RemoveFinalizers(ctx context.Context, obj extensionsv1alpha1.Object) error {
	ref := r.SecretRef(obj)
	shared, err := r.secretSharedWithOthers(ctx, obj, ref)
	if err != nil {
		return err
	}
	if !shared {
		err := r.updateFinalizer(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Secret{}, controllerutil.RemoveFinalizer)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	if err := r.updateFinalizer(ctx, client.ObjectKeyFromObject(obj), obj, controllerutil.RemoveFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing %s %s: %w", r.Kind, obj.GetName(), err)
	}
	return nil
}

func (r *Reconciler) secretSharedWithOthers(ctx context.Context, obj extensionsv1alpha1.Object, ref corev1.SecretReference) (bool, error) {
	list := r.NewList()
	if err := r.Client.List(ctx, list); err != nil {
		return false, fmt.Errorf("listing %s objects: %w", r.Kind, err)
	}
	shared := false
	err := meta.EachListItem(list, func(o runtime.Object) error {
		other := o.(extensionsv1alpha1.Object)
		if other.GetUID() != obj.GetUID() && r.SecretRef(other) == ref {
			shared = true
		}
		return nil
	})
	return shared, err
}

func (r *Reconciler) ensureFinalizers(ctx context.Context, obj extensionsv1alpha1.Object) error {
	if err := r.updateFinalizer(ctx, client.ObjectKeyFromObject(obj), obj, controllerutil.AddFinalizer); err != nil {
		return err
	}
	ref := r.SecretRef(obj)
	err := r.updateFinalizer(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Secret{}, controllerutil.AddFinalizer)
	if apierrors.IsNotFound(err) {
		return missingSecret(ref)
	}
	return err
}

// updateFinalizer adds or removes our finalizer on the object at key (read into obj), with
// optimistic locking: other controllers edit finalizers too.
func (r *Reconciler) updateFinalizer(ctx context.Context, key client.ObjectKey, obj client.Object, change func(client.Object, string) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if obj.GetResourceVersion() == "" || obj.GetName() == "" {
			if err := r.Client.Get(ctx, key, obj); err != nil {
				return err
			}
		}
		base := obj.DeepCopyObject().(client.Object)
		if !change(obj, r.Finalizer) {
			return nil
		}
		err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			obj.SetResourceVersion("") // re-read on the next attempt
		}
		return err
	})
}

func (r *Reconciler) removeAnnotation(ctx context.Context, obj extensionsv1alpha1.Object) error {
	if _, ok := obj.GetAnnotations()[AnnotationOperation]; !ok {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	annotations := obj.GetAnnotations()
	delete(annotations, AnnotationOperation)
	obj.SetAnnotations(annotations)
	return r.Client.Patch(ctx, obj, client.MergeFrom(base))
}

func (r *Reconciler) patchStatus(ctx context.Context, obj extensionsv1alpha1.Object, mutate func()) error {
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	// Optimistic lock: a status written from a stale read must fail, not undo a newer one.
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing status of %s %s: %w", r.Kind, obj.GetName(), err)
	}
	return nil
}

func verb(t gardencorev1beta1.LastOperationType) string {
	switch t {
	case gardencorev1beta1.LastOperationTypeCreate:
		return "Creating"
	case gardencorev1beta1.LastOperationTypeRestore:
		return "Restoring"
	}
	return "Reconciling"
}

func pastVerb(t gardencorev1beta1.LastOperationType) string {
	switch t {
	case gardencorev1beta1.LastOperationTypeCreate:
		return "created"
	case gardencorev1beta1.LastOperationTypeRestore:
		return "restored"
	}
	return "reconciled"
}
