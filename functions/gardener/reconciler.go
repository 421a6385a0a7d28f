package gardener

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Actuator does the provider work for one kind; the Reconciler owns the protocol around it.
// Both methods must be idempotent.
type Actuator interface {
	// Reconcile converges the object (Create, Reconcile and Restore); credentials is its
	// spec.secretRef secret (its data, and the metadata that marks a workload identity's).
	Reconcile(ctx context.Context, obj extensionsv1alpha1.Object, credentials *corev1.Secret) (Reconciliation, error)
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
// observedGeneration as upstream writes them. It is a runner.Handler.
//
// Events are triggers, never the source of truth: anyone who can publish on the event plane
// can forge one, so every decision is taken on the live object. It spends as few API requests
// as it can, since in a burst they are what a function waits on: a new object is not read but
// claimed (see claim), one write whose preconditions prove every field the decision to claim
// rests on and whose answer is the live object; the secret's finalizer is a strategic merge
// patch whose answer carries the credentials; and lastOperation is written once, when the
// operation has an outcome, not also as Processing before it.
type Reconciler struct {
	StatusWriter
	// Scope is what the function serves: an object of another type or class is never touched.
	Scope     Scope
	NewObject func() extensionsv1alpha1.Object
	// Migrates says the kind takes part in control-plane migration (BackupEntry). For a kind
	// that does not (BackupBucket), a migrate annotation is reconciled like any other change.
	Migrates bool
	Actuator Actuator
}

// StatusWriter is how the protocol writes an object: lastOperation, lastError and
// observedGeneration as upstream writes them, and our finalizer on the object and on its
// spec.secretRef secret. The Reconciler writes through it, and so does whoever finishes an
// operation the reconciler left pending (the purge of a deleted BackupEntry).
type StatusWriter struct {
	Client client.Client
	Kind   events.Kind
	// SecretRef returns the object's spec.secretRef.
	SecretRef func(extensionsv1alpha1.Object) corev1.SecretReference
	Finalizer string
	Log       *zap.Logger
	// Now is the clock (tests set it).
	Now func() time.Time
}

// Handle converges the live object the event names: claimed when the event announces a new
// object, read otherwise.
func (r *Reconciler) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return runner.Permanent(err)
	}
	if ref.Kind != r.Kind {
		return runner.Permanentf("event about a %s reached the %s function", ref.Kind, r.Kind)
	}
	claimed, operation, err := r.claim(ctx, e, ref)
	switch {
	case err != nil:
		return err
	case claimed != nil:
		return r.converge(ctx, claimed, operation)
	}
	obj, err := r.read(ctx, ref.Name)
	if obj == nil {
		return err
	}
	return r.Reconcile(ctx, obj)
}

// claim adds our finalizer to the object the event announces as new, if the event's copy says
// that is what the live object needs: not being deleted, without our finalizer, no
// lastOperation (so not migrated away), no operation annotation other than reconcile or
// restore. The write is a JSON patch whose test operations prove each of those fields and the
// uid and resourceVersion on the live object, so a forged or outdated copy changes nothing;
// a reconcile annotation goes in the same write, as upstream removes it before the work. It
// returns the live object the server answers with and the operation it asked for, or nil when
// the copy does not qualify or its proof failed: then the object is read.
func (r *Reconciler) claim(ctx context.Context, e cloudevents.Event, ref events.Ref) (extensionsv1alpha1.Object, string, error) {
	copied := r.NewObject()
	if err := json.Unmarshal(e.Data(), copied); err != nil || copied.GetName() != ref.Name || copied.GetUID() == "" || copied.GetResourceVersion() == "" {
		return nil, "", nil
	}
	operation := copied.GetAnnotations()[AnnotationOperation]
	// The claim proves the resourceVersion, so the copy's type and class are the live object's.
	if !r.Scope.Serves(copied) || copied.GetDeletionTimestamp() != nil || controllerutil.ContainsFinalizer(copied, r.Finalizer) ||
		copied.GetExtensionStatus().GetLastOperation() != nil ||
		(operation != "" && operation != OperationReconcile && operation != OperationRestore) {
		return nil, "", nil
	}
	patch, err := claimPatch(copied, r.Finalizer)
	if err != nil {
		return nil, "", err
	}
	// The answer goes into an empty object: decoding into the copy would keep what the copy
	// has and the live object lacks.
	live := r.NewObject()
	live.SetName(ref.Name)
	err = r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case err == nil:
		return live, operation, nil
	case apierrors.IsInvalid(err), apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		// The copy is not the live object (outdated or forged), or the object is gone.
		r.Log.Debug("the event's copy is not the live object: reading it", zap.String("name", ref.Name), zap.Error(err))
		return nil, "", nil
	default:
		return nil, "", fmt.Errorf("adding finalizer to %s %s: %w", r.Kind, ref.Name, err)
	}
}

// claimPatch is the JSON patch (RFC 6902) that adds finalizer to obj, and drops a reconcile
// annotation, only if the live object still has obj's uid, resourceVersion, finalizers and
// operation annotation and has no deletionTimestamp and no status. A test of a missing member
// against null passes, of any other value fails.
func claimPatch(obj extensionsv1alpha1.Object, finalizer string) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var finalizers any // null: no finalizers
	if f := obj.GetFinalizers(); len(f) > 0 {
		finalizers = f
	}
	ops := []op{
		{"test", "/metadata/uid", obj.GetUID()},
		{"test", "/metadata/resourceVersion", obj.GetResourceVersion()},
		{"test", "/metadata/deletionTimestamp", nil},
		{"test", "/status", nil},
		{"test", "/metadata/finalizers", finalizers},
	}
	switch operation, annotated := obj.GetAnnotations()[AnnotationOperation]; {
	case obj.GetAnnotations() == nil:
		ops = append(ops, op{"test", "/metadata/annotations", nil})
	case !annotated:
		ops = append(ops, op{"test", annotationPath, nil})
	case operation == OperationReconcile:
		ops = append(ops, op{"test", annotationPath, operation}, op{Op: "remove", Path: annotationPath})
	default:
		ops = append(ops, op{"test", annotationPath, operation})
	}
	ops = append(ops, op{"add", "/metadata/finalizers", append(slices.Clone(obj.GetFinalizers()), finalizer)})
	return json.Marshal(ops)
}

// annotationPath is the JSON pointer (RFC 6901) to the operation annotation.
var annotationPath = "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(AnnotationOperation)

// read reads the object; nil without an error means it is gone.
func (r *Reconciler) read(ctx context.Context, name string) (extensionsv1alpha1.Object, error) {
	obj := r.NewObject()
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Log.Debug("object is gone, nothing to do", zap.String("name", name))
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", r.Kind, name, err)
	}
	return obj, nil
}

// Reconcile converges the live object obj. A write that finds obj outdated returns a conflict
// error, one that finds it gone a not-found error.
func (r *Reconciler) Reconcile(ctx context.Context, obj extensionsv1alpha1.Object) error {
	return r.converge(ctx, obj, obj.GetAnnotations()[AnnotationOperation])
}

// converge is Reconcile for the operation annotation operation, which a claim may have
// removed from obj already.
func (r *Reconciler) converge(ctx context.Context, obj extensionsv1alpha1.Object, operation string) error {
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

func (r *Reconciler) reconcile(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, operation string) error {
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

func (r *Reconciler) delete(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object) error {
	if !controllerutil.ContainsFinalizer(obj, r.Finalizer) {
		return nil // never ours, or already released
	}
	t := gardencorev1beta1.LastOperationTypeDelete
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
	return r.Release(ctx, obj)
}

// migrate lets go of the object: the destination seed takes over. Nothing is cleaned up (etcd
// keeps backing up into the bucket until the control plane has moved); the finalizers go, so
// that gardenlet can delete the object without the extension purging anything.
func (r *Reconciler) migrate(ctx context.Context, log *zap.Logger, obj extensionsv1alpha1.Object) error {
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

// Fail records err in the status — lastOperation Error, lastError with its codes — and
// returns it for the runner to retry or dead-letter.
func (r *StatusWriter) Fail(ctx context.Context, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, err error) error {
	description := err.Error()
	codes, task := CodesOf(err), taskOf(err)
	r.Log.Warn("failed", zap.String("kind", string(r.Kind)), zap.String("name", obj.GetName()),
		zap.String("operation", string(t)), zap.Error(err), zap.Any("codes", codes))
	if patchErr := r.patchStatus(ctx, obj, func() {
		setError(obj, t, gardencorev1beta1.LastOperationStateError, description, codes, task, r.Now())
	}); patchErr != nil {
		return errors.Join(err, patchErr)
	}
	return err
}

// Progress records how far a long operation got: lastOperation Processing at progress.
func (r *StatusWriter) Progress(ctx context.Context, obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, progress int32, description string) error {
	return r.patchStatus(ctx, obj, func() {
		setLastOperation(obj, t, gardencorev1beta1.LastOperationStateProcessing, progress, description, r.Now())
	})
}

// Release ends a deletion that is done. When another controller's finalizer keeps the object
// after ours goes, lastOperation says Delete Succeeded first, as upstream does, so that no
// earlier lastError outlives the deletion; when ours is the last, the object goes at once and
// that write is saved. Then RemoveFinalizers.
func (r *StatusWriter) Release(ctx context.Context, obj extensionsv1alpha1.Object) error {
	if len(obj.GetFinalizers()) > 1 {
		t := gardencorev1beta1.LastOperationTypeDelete
		if err := r.patchStatus(ctx, obj, func() { setSucceeded(obj, t, r.succeeded(t), r.Now()) }); err != nil {
			return err
		}
	}
	return r.RemoveFinalizers(ctx, obj)
}

// RemoveFinalizers releases the object: first its spec.secretRef secret, as upstream does,
// then the object itself. A conflict means obj is outdated: the caller reads it again.
func (r *StatusWriter) RemoveFinalizers(ctx context.Context, obj extensionsv1alpha1.Object) error {
	ref := r.SecretRef(obj)
	if _, err := r.patchSecretFinalizer(ctx, ref, "$deleteFromPrimitiveList/finalizers"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	// The optimistic lock keeps another controller's finalizer change; a conflict means the
	// object changed since it was read (gardenlet touches a deleting object while it waits),
	// so read it again and remove ours from that, rather than redo the whole operation.
	for attempt := 0; ; attempt++ {
		err := r.patchFinalizer(ctx, obj, controllerutil.RemoveFinalizer)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt >= 3:
			return fmt.Errorf("releasing %s %s: %w", r.Kind, obj.GetName(), err)
		}
		uid := obj.GetUID()
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("releasing %s %s: %w", r.Kind, obj.GetName(), err)
		}
		if obj.GetUID() != uid {
			return nil // a namesake: not ours to release
		}
	}
}

// ensureFinalizers puts our finalizer on the object (dropping its operation annotation in the
// same patch if dropOperation) and on its spec.secretRef secret, and returns the secret's data.
func (r *StatusWriter) ensureFinalizers(ctx context.Context, obj extensionsv1alpha1.Object, dropOperation bool) (*corev1.Secret, error) {
	change := func(o client.Object, finalizer string) bool {
		changed := controllerutil.AddFinalizer(o, finalizer)
		if dropOperation {
			changed = dropAnnotation(o) || changed
		}
		return changed
	}
	if err := r.patchFinalizer(ctx, obj, change); err != nil {
		return nil, fmt.Errorf("adding finalizer to %s %s: %w", r.Kind, obj.GetName(), err)
	}
	ref := r.SecretRef(obj)
	secret, err := r.patchSecretFinalizer(ctx, ref, "finalizers")
	switch {
	case apierrors.IsNotFound(err):
		return nil, missingSecret(ref)
	case err != nil:
		return nil, fmt.Errorf("adding finalizer to secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return secret, nil
}

// patchFinalizer patches obj with change: adding or removing our finalizer, perhaps with more
// of its metadata. The patch carries obj's resourceVersion: other controllers edit finalizers
// too, and obj may come from an event.
func (r *StatusWriter) patchFinalizer(ctx context.Context, obj extensionsv1alpha1.Object, change func(client.Object, string) bool) error {
	base := obj.DeepCopyObject().(client.Object)
	if !change(obj, r.Finalizer) {
		return nil
	}
	return r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// patchSecretFinalizer adds (directive "finalizers") or removes ("$deleteFromPrimitiveList/
// finalizers") our finalizer on a secret with one strategic merge patch: no read, no conflict
// with gardenlet's own patches of the secret, and the answer is the secret.
func (r *StatusWriter) patchSecretFinalizer(ctx context.Context, ref corev1.SecretReference, directive string) (*corev1.Secret, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{directive: []string{r.Finalizer}}})
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	return secret, r.Client.Patch(ctx, secret, client.RawPatch(types.StrategicMergePatchType, patch))
}

func (r *StatusWriter) removeAnnotation(ctx context.Context, obj extensionsv1alpha1.Object) error {
	base := obj.DeepCopyObject().(client.Object)
	if !dropAnnotation(obj) {
		return nil
	}
	return r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// dropAnnotation removes the operation annotation from o and reports whether it had one.
func dropAnnotation(o client.Object) bool {
	annotations := o.GetAnnotations()
	if _, ok := annotations[AnnotationOperation]; !ok {
		return false
	}
	delete(annotations, AnnotationOperation)
	o.SetAnnotations(annotations)
	return true
}

func (r *StatusWriter) patchStatus(ctx context.Context, obj extensionsv1alpha1.Object, mutate func()) error {
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	// Optimistic lock: a status written from a stale read must fail, not undo a newer one.
	if err := r.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing status of %s %s: %w", r.Kind, obj.GetName(), err)
	}
	return nil
}

// succeeded is the description of a successful operation of type t.
func (r *StatusWriter) succeeded(t gardencorev1beta1.LastOperationType) string {
	return fmt.Sprintf("%s %s", r.Kind, pastVerb(t))
}

func pastVerb(t gardencorev1beta1.LastOperationType) string {
	switch t {
	case gardencorev1beta1.LastOperationTypeCreate:
		return "created"
	case gardencorev1beta1.LastOperationTypeRestore:
		return "restored"
	case gardencorev1beta1.LastOperationTypeDelete:
		return "deleted"
	}
	return "reconciled"
}
