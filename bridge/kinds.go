package bridge

import (
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// kinds are the kinds of object the bridge watches and announces, one row each. A new kind is
// a row here and its event types and subject in events. The namespaces and secrets the objects
// refer to (relations) are watched as their inputs and announced by none of their own.
var kinds = []*kind{
	gardenerKind(events.KindBackupBucket, "backupbuckets", events.SubjectBuckets, relations[*extensionsv1alpha1.BackupBucket]{
		secretRef: func(b *extensionsv1alpha1.BackupBucket) corev1.SecretReference { return b.Spec.SecretRef },
	}),
	gardenerKind(events.KindBackupEntry, "backupentries", events.SubjectEntries, relations[*extensionsv1alpha1.BackupEntry]{
		secretRef:    func(e *extensionsv1alpha1.BackupEntry) corev1.SecretReference { return e.Spec.SecretRef },
		controlPlane: func(e *extensionsv1alpha1.BackupEntry) string { return gardener.EntryNamespace(e.Name) },
		// A bucket's deletion waits for its entries to go.
		holds: func(e *extensionsv1alpha1.BackupEntry) held {
			return held{kind: events.KindBackupBucket, name: e.Spec.BucketName, trigger: "entry-gone/" + string(e.UID)}
		},
	}),
	ownKind[backupv1alpha1.EtcdBackupConfig](events.KindEtcdBackupConfig, "etcdbackupconfigs", events.SubjectEtcdBackupConfigs),
	ownKind[backupv1alpha1.RestoreDrill](events.KindRestoreDrill, "restoredrills", events.SubjectRestoreDrills),
	ownKind[backupv1alpha1.BackupCopyPolicy](events.KindBackupCopyPolicy, "backupcopypolicies", events.SubjectBackupCopyPolicies),
}

// kind is a row of kinds: where a kind is served, and what the bridge needs to know of its
// objects. Its functions take an object of the kind's informer; ok is false for the objects of
// a kind without the part asked about (and for anything else).
type kind struct {
	kind     events.Kind
	gv       schema.GroupVersion
	resource string
	// subject matches every event of the kind.
	subject string
	// optional kinds may be missing from the API server: housekeeper's own, whose CRDs a seed
	// where only Gardener's are installed lacks, and may install later. The bridge watches each
	// once the API server serves it. The others it lists at its start.
	optional  bool
	newObject func() kruntime.Object
	// marshal is the object's JSON with apiVersion and kind, without managedFields and
	// last-applied-configuration (Snapshot).
	marshal func(obj any) ([]byte, error)
	// extension is the object as a Gardener extension object. An extension object is the bridge's if the scope serves its type and class, has work
	// outstanding until its status reports the current generation succeeded, and may report
	// its secret missing (gardener.WaitsForSecret).
	extension func(obj any) (extensionsv1alpha1.Object, bool)
	// The object's relations to others (relations).
	secretRef    func(obj any) (corev1.SecretReference, bool)
	controlPlane func(obj any) (string, bool)
	holds        func(obj any) (held, bool)
}

// relations are what an object of a kind, of Go type P, refers to; nil for what it does not.
type relations[P client.Object] struct {
	// secretRef is the secret holding the object's credentials: its data is an input of the
	// object, and its appearance or change announces the object again.
	secretRef func(P) corev1.SecretReference
	// controlPlane is the namespace the object's function writes into (a BackupEntry's shoot
	// namespace): its uid and the shoot it belongs to are inputs of the object, and its
	// appearance or a change of its shoot announces the object again.
	controlPlane func(P) string
	// holds is the object whose deletion waits for this one to go: announced again when it
	// goes, if it is being deleted.
	holds func(P) held
}

// held is an object whose deletion waits for another to go, and the trigger of the
// announcement its going makes.
type held struct {
	kind          events.Kind
	name, trigger string
}

// gardenerKind is the row of a Gardener extension kind (extensions.gardener.cloud) of Go type P.
func gardenerKind[T any, P interface {
	*T
	extensionsv1alpha1.Object
}](k events.Kind, resource, subject string, r relations[P]) *kind {
	row := newKind[T, P](k, extensionsv1alpha1.SchemeGroupVersion, resource, subject)
	row.extension = typed(func(p P) extensionsv1alpha1.Object { return p })
	row.secretRef = typed(r.secretRef)
	row.controlPlane = typed(r.controlPlane)
	row.holds = typed(r.holds)
	return row
}

// ownKind is the row of one of housekeeper's own kinds (backup.housekeeper.dev) of Go type P.
func ownKind[T any, P interface {
	*T
	client.Object
}](k events.Kind, resource, subject string) *kind {
	row := newKind[T, P](k, backupv1alpha1.SchemeGroupVersion, resource, subject)
	row.optional = true
	row.extension = typed[P, extensionsv1alpha1.Object](nil)
	row.secretRef = typed[P, corev1.SecretReference](nil)
	row.controlPlane = typed[P, string](nil)
	row.holds = typed[P, held](nil)
	return row
}

func newKind[T any, P interface {
	*T
	client.Object
}](k events.Kind, gv schema.GroupVersion, resource, subject string) *kind {
	return &kind{
		kind: k, gv: gv, resource: resource, subject: subject,
		newObject: func() kruntime.Object { return P(new(T)) },
		marshal:   trimmed[T, P](gv.WithKind(string(k))),
	}
}

// kindOf is the row of k, nil for a kind the bridge does not watch.
func kindOf(k events.Kind) *kind {
	for _, row := range kinds {
		if row.kind == k {
			return row
		}
	}
	return nil
}
