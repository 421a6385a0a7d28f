package gardener

import (
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// Annotations of the extension contract.
const (
	AnnotationOperation   = v1beta1constants.GardenerOperation
	OperationReconcile    = v1beta1constants.GardenerOperationReconcile
	OperationMigrate      = v1beta1constants.GardenerOperationMigrate
	OperationRestore      = v1beta1constants.GardenerOperationRestore
	OperationWaitForState = v1beta1constants.GardenerOperationWaitForState
)

// OperationType decides the lastOperation type as upstream does: the migrate annotation,
// then deletion, then the restore annotation; no lastOperation yet is Create; an unfinished
// Create, Migrate or Restore is done again; everything else is Reconcile.
func OperationType(obj extensionsv1alpha1.Object) gardencorev1beta1.LastOperationType {
	switch op := obj.GetAnnotations()[AnnotationOperation]; {
	case op == OperationMigrate:
		return gardencorev1beta1.LastOperationTypeMigrate
	case obj.GetDeletionTimestamp() != nil:
		return gardencorev1beta1.LastOperationTypeDelete
	case op == OperationRestore:
		return gardencorev1beta1.LastOperationTypeRestore
	}
	last := obj.GetExtensionStatus().GetLastOperation()
	if last == nil {
		return gardencorev1beta1.LastOperationTypeCreate
	}
	switch last.Type {
	case gardencorev1beta1.LastOperationTypeCreate, gardencorev1beta1.LastOperationTypeMigrate, gardencorev1beta1.LastOperationTypeRestore:
		if last.State != gardencorev1beta1.LastOperationStateSucceeded {
			return last.Type
		}
	}
	return gardencorev1beta1.LastOperationTypeReconcile
}

// IsMigrated says the object's migration to another seed succeeded.
func IsMigrated(obj extensionsv1alpha1.Object) bool {
	last := obj.GetExtensionStatus().GetLastOperation()
	return last != nil && last.Type == gardencorev1beta1.LastOperationTypeMigrate &&
		last.State == gardencorev1beta1.LastOperationStateSucceeded
}

// ShouldSkipOperation says, as upstream's extension library does, that a migrated object is
// left alone by every operation t except a new Migrate or a Restore: deletion included.
func ShouldSkipOperation(obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType) bool {
	return t != gardencorev1beta1.LastOperationTypeMigrate && t != gardencorev1beta1.LastOperationTypeRestore && IsMigrated(obj)
}

// setSucceeded writes the success of t: progress 100, lastError cleared, observedGeneration.
func setSucceeded(obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, description string, now time.Time) {
	setLastOperation(obj, t, gardencorev1beta1.LastOperationStateSucceeded, 100, description, now)
	obj.GetExtensionStatus().SetLastError(nil)
	obj.GetExtensionStatus().SetObservedGeneration(obj.GetGeneration())
}

// setError writes a failure of t: state Error (retried) or Failed (not), progress 50,
// lastError with the codes and the task that failed or waits (if one is known),
// observedGeneration.
func setError(obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, state gardencorev1beta1.LastOperationState, description string, codes []gardencorev1beta1.ErrorCode, task string, now time.Time) {
	setLastOperation(obj, t, state, 50, description, now)
	lastError := &gardencorev1beta1.LastError{
		Description:    description,
		Codes:          codes,
		LastUpdateTime: ptr.To(kube.Time(now)),
	}
	if task != "" {
		lastError.TaskID = &task
	}
	obj.GetExtensionStatus().SetLastError(lastError)
	obj.GetExtensionStatus().SetObservedGeneration(obj.GetGeneration())
}

// setPending writes t as Pending: work is scheduled and the object waits for it.
func setPending(obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, progress int32, description string, now time.Time) {
	setLastOperation(obj, t, gardencorev1beta1.LastOperationStatePending, progress, description, now)
	obj.GetExtensionStatus().SetLastError(nil)
	obj.GetExtensionStatus().SetObservedGeneration(obj.GetGeneration())
}

func setLastOperation(obj extensionsv1alpha1.Object, t gardencorev1beta1.LastOperationType, state gardencorev1beta1.LastOperationState, progress int32, description string, now time.Time) {
	obj.GetExtensionStatus().SetLastOperation(&gardencorev1beta1.LastOperation{
		Type:           t,
		State:          state,
		Progress:       progress,
		Description:    description,
		LastUpdateTime: kube.Time(now),
	})
}
