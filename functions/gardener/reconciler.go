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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Actuator does the provider work for one kind of extension object, T (*BackupBucket,
// *BackupEntry); the Reconciler owns the protocol around it. Both methods must be idempotent.
type Actuator[T extensionsv1alpha1.Object] interface {
	// Reconcile converges the object (Create, Reconcile and Restore); credentials is its
	// spec.secretRef secret (its data, and the metadata that marks a workload identity's).
	Reconcile(ctx context.Context, obj T, credentials *corev1.Secret) (Reconciliation, error)
	// Delete cleans up after the object.
	Delete(ctx context.Context, obj T) (Deletion, error)
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
// observedGeneration as upstream writes them. It is a runner.Handler.
//
// Events are triggers, never the source of truth: anyone who can publish on the event plane
// can forge one, so every decision is taken on the live object. It spends as few API requests
// as it can, since in a burst they are what a function waits on: a new object is not read but
// claimed (see claim), one write whose preconditions prove every field the decision to claim
// rests on and whose answer is the live object; the secret's finalizer is a strategic merge
// patch whose answer carries the credentials; and lastOperation is written once, when the
// operation has an outcome, not also as Processing before it.
type Reconciler[T extensionsv1alpha1.Object] struct {
	StatusWriter[T]
	// Scope is what the function serves: an object of another type or class is never touched.
	Scope Scope
	// NewObject returns an empty object to read or decode into.
	NewObject func() T
	// Migrates says the kind takes part in control-plane migration (BackupEntry). For a kind
	// that does not (BackupBucket), a migrate annotation is reconciled like any other change.
	Migrates bool
	Actuator Actuator[T]
}

// Handle converges the live object the event names: claimed when the event announces a new
// object, read otherwise.
func (r *Reconciler[T]) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return runner.Permanent(err)
	}
	if ref.Kind != r.Kind {
		return runner.Permanentf("event about a %s reached the %s function", ref.Kind, r.Kind)
	}
	// An object being deleted or gone is never claimed: read, without decoding its copy.
	if op, _ := events.OperationOf(e.Type()); op != events.OpDeleting && op != events.OpDeleted {
		claimed, operation, ok, err := r.claim(ctx, e, ref)
		switch {
		case err != nil:
			return err
		case ok:
			return r.converge(ctx, claimed, operation)
		}
	}
	obj, found, err := r.read(ctx, ref.Name)
	if !found {
		return err
	}
	return r.Reconcile(ctx, obj)
}

// read reads the object; not found without an error means it is gone.
func (r *Reconciler[T]) read(ctx context.Context, name string) (obj T, found bool, err error) {
	obj = r.NewObject()
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Log.Debug("object is gone, nothing to do", zap.String("name", name))
			return obj, false, nil
		}
		return obj, false, fmt.Errorf("reading %s %s: %w", r.Kind, name, err)
	}
	return obj, true, nil
}

// Reconcile converges the live object obj. A write that finds obj outdated returns a conflict
// error, one that finds it gone a not-found error.
func (r *Reconciler[T]) Reconcile(ctx context.Context, obj T) error {
	return r.converge(ctx, obj, obj.GetAnnotations()[AnnotationOperation])
}

// converge is Reconcile for the operation annotation operation, which a claim may have
// removed from obj already.
func (r *Reconciler[T]) converge(ctx context.Context, obj T, operation string) error {
	log := r.Log.With(zap.String("kind", string(r.Kind)), zap.String("name", obj.GetName()))
	if !r.Scope.Serves(obj) {
		log.Debug("not this installation's: its type or class is not served", zap.String("type", obj.GetExtensionSpec().GetExtensionType()))
		return nil
	}
	if operation == OperationWaitForState {
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
		return r.reconcile(ctx, log, obj, t, operation)
	}
}

// operationType is OperationType for this kind: a kind that does not migrate has no Migrate.
func (r *Reconciler[T]) operationType(obj T) gardencorev1beta1.LastOperationType {
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
func (r *Reconciler[T]) migratedAway(ctx context.Context, log *zap.Logger, obj T) error {
	if obj.GetDeletionTimestamp() == nil || !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		log.Debug("migrated away: nothing to do")
		return nil
	}
	log.Info("migrated object deleted: releasing it without cleanup; the destination seed owns its backups")
	return r.RemoveFinalizers(ctx, obj)
}

func (r *Reconciler[T]) reconcile(ctx context.Context, log *zap.Logger, obj T, t gardencorev1beta1.LastOperationType, operation string) error {
	last := obj.GetExtensionStatus().GetLastOperation()
	// Already done for this generation: do the (idempotent) work to repair drift, but write
	// nothing unless the outcome changed, so a duplicated or replayed event changes nothing.
	converged := operation == "" && t == gardencorev1beta1.LastOperationTypeReconcile &&
		last != nil && last.State == gardencorev1beta1.LastOperationStateSucceeded &&
		obj.GetExtensionStatus().GetObservedGeneration() == obj.GetGeneration()

	// A reconcile annotation goes before the work, as upstream does, in the patch that adds
	// the finalizer: one write of the object instead of two.
	credentials, err := r.ensureFinalizers(ctx, obj, operation == OperationReconcile)
	if apierrors.IsConflict(err) {
		return err
	}
	if err != nil {
		return r.Fail(ctx, obj, t, err)
	}
	result, err := r.Actuator.Reconcile(ctx, obj, credentials)
	if err != nil {
		return r.Fail(ctx, obj, t, err)
	}
	description := result.Description
	if description == "" {
		description = r.succeeded(t)
	}
	// A converged object whose last success said just that needs no new word: a Create stays
	// the Create it was.
	unchanged := last != nil && (last.Description == description || result.Description == "" && last.Description == r.succeeded(last.Type))
	if !converged || !unchanged {
		now := r.Now()
		// gardenlet hears of an extension's outcome only through a change of lastOperation
		// (extension predicate LastOperationChanged). Asked by annotation to reconcile an object
		// whose Succeeded, same words, was written this same second (lastUpdateTime has whole
		// seconds), the write would change nothing and gardenlet would wait forever: say
		// Processing first, as upstream's reconciler does on every run.
		if operation != "" && last != nil && last.State == gardencorev1beta1.LastOperationStateSucceeded && last.Type == t &&
			last.Description == description && last.LastUpdateTime.Time.Truncate(time.Second).Equal(now.Truncate(time.Second)) {
			if err := r.Progress(ctx, obj, t, 50, description); err != nil {
				return err
			}
		}
		log.Info("succeeded", zap.String("operation", string(t)), zap.String("description", description))
		if err := r.patchStatus(ctx, obj, func() { setSucceeded(obj, t, description, now) }); err != nil {
			return err
		}
	}
	if operation == OperationRestore { // removed after Succeeded is written, as upstream does
		return r.removeAnnotation(ctx, obj)
	}
	return nil
}

func (r *Reconciler[T]) delete(ctx context.Context, log *zap.Logger, obj T) error {
	if !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		return nil // never ours, or already released
	}
	t := gardencorev1beta1.LastOperationTypeDelete
	d, err := r.Actuator.Delete(ctx, obj)
	if errors.Is(err, ErrObjectChanged) {
		log.Info("the object changed during its deletion: reading it again", zap.Error(err))
		return err
	}
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
	return r.Release(ctx, obj)
}

// migrate lets go of the object: the destination seed takes over. Nothing is cleaned up (etcd
// keeps backing up into the bucket until the control plane has moved); the finalizers go, so
// that gardenlet can delete the object without the extension purging anything.
func (r *Reconciler[T]) migrate(ctx context.Context, log *zap.Logger, obj T) error {
	t := gardencorev1beta1.LastOperationTypeMigrate
	if err := r.patchStatus(ctx, obj, func() { setSucceeded(obj, t, string(r.Kind)+" migrated", r.Now()) }); err != nil {
		return err
	}
	if err := r.RemoveFinalizers(ctx, obj); err != nil {
		return err
	}
	log.Info("migrated")
	// A deleting object is gone once released: no annotation is left to remove.
	return client.IgnoreNotFound(r.removeAnnotation(ctx, obj))
}
