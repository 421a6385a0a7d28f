package bridge

import (
	"maps"
	"slices"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Annotations whose change alone carries no new desired state: gardenlet bumps the timestamp
// to force an update event and confirms a deletion before it deletes (the deletion itself is
// the event), and the functions remove the operation annotation once they act on it.
const (
	timestampAnnotation            = v1beta1constants.GardenerTimestamp
	deletionConfirmationAnnotation = v1beta1constants.ConfirmationDeletion
	operationAnnotation            = v1beta1constants.GardenerOperation
	azureRotateAnnotation          = objectstore.AnnotationAzureRotate
)

// consumedAnnotations are those a function removes once it acted on them: their removal is
// its own write, no news.
var consumedAnnotations = []string{operationAnnotation, azureRotateAnnotation}

// filter selects the objects this bridge is responsible for.
type filter struct {
	scope gardener.Scope
}

// handles reports whether obj is the bridge's: a BackupBucket or BackupEntry of a configured
// type and class, or one of housekeeper's own objects.
func (f filter) handles(obj client.Object) bool {
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupBucket, *extensionsv1alpha1.BackupEntry:
		return f.scope.Serves(o.(extensionsv1alpha1.Object))
	case *backupv1alpha1.EtcdBackupConfig, *backupv1alpha1.RestoreDrill, *backupv1alpha1.BackupCopyPolicy:
		return true // housekeeper's own kinds: no type or class to filter by
	default:
		return false
	}
}

// relevantChange reports whether an update can change what a function must do: a new
// generation (spec), deletion, a finalizer taken away, or annotations set or changed other than
// those above (the operation or rotate annotation set, retention and force-deletion annotations). Status
// writes, added finalizers and a removed operation annotation — the functions' own writes — are
// not: announcing them would make each new object cost its function a second round.
func relevantChange(old, cur client.Object) bool {
	if old.GetGeneration() != cur.GetGeneration() {
		return true
	}
	if (old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil) {
		return true
	}
	if slices.ContainsFunc(old.GetFinalizers(), func(f string) bool { return !slices.Contains(cur.GetFinalizers(), f) }) {
		return true // a finalizer taken away: if it was ours, it must come back
	}
	was, is := maps.Clone(old.GetAnnotations()), maps.Clone(cur.GetAnnotations())
	for _, a := range []string{timestampAnnotation, deletionConfirmationAnnotation} {
		delete(was, a)
		delete(is, a)
	}
	for _, a := range consumedAnnotations {
		if _, kept := is[a]; !kept {
			delete(was, a) // removed: acted on
		}
	}
	return !maps.Equal(was, is)
}
