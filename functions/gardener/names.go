// Package gardener holds the rules of Gardener's extension contract for backups that every
// housekeeper component follows: names, annotations, finalizers and the status protocol. Its
// Reconciler[T] says the protocol once for an extension object type T (claim, finalizer,
// lastOperation, lastError with Gardener's codes, object-store errors classified where the
// status is written); a kind brings a two-method Actuator[T], as gardener's extension library
// has it.
package gardener

import (
	"strings"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// SourcePrefix marks the BackupEntry of the source seed during control-plane migration.
const SourcePrefix = "source-"

// LabelManagedBy with the value ManagedBy marks the secrets housekeeper writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "housekeeper"
)

// ShootUIDAnnotation is set by gardener on a shoot's control-plane namespace: the uid of the
// shoot it belongs to.
const ShootUIDAnnotation = v1beta1constants.ShootUID

// IsSourceEntry says the BackupEntry is a control-plane migration's source entry.
func IsSourceEntry(entryName string) bool { return strings.HasPrefix(entryName, SourcePrefix) }

// EntryShootUID is the shoot uid a BackupEntry name ends with (its last --<uid> token), or ""
// for a name without one.
func EntryShootUID(entryName string) string {
	name := strings.TrimPrefix(entryName, SourcePrefix)
	if i := strings.LastIndex(name, "--"); i > 0 {
		return name[i+2:]
	}
	return ""
}

// NamespaceOwner returns the uid of the shoot a control-plane namespace belongs to, and
// whether that is another shoot than the one of the entry: then the entry must neither write
// nor delete its secret there (a re-created shoot's namespace has the old name).
func NamespaceOwner(namespaceAnnotations map[string]string, entryName string) (owner string, foreign bool) {
	owner = namespaceAnnotations[ShootUIDAnnotation]
	return owner, owner != "" && owner != EntryShootUID(entryName)
}

// EntryNamespace is the shoot's control-plane namespace for a BackupEntry: the entry name
// (shoot--<project>--<shoot>--<uid>) without the source- prefix and without its last --<uid>
// token.
func EntryNamespace(entryName string) string {
	name := strings.TrimPrefix(entryName, SourcePrefix)
	if i := strings.LastIndex(name, "--"); i > 0 {
		return name[:i]
	}
	return name
}

// EntryPrefix is the object-store prefix holding a BackupEntry's backups: the entry name
// without source-, with a trailing slash, so that shoot--a--b--1 never matches shoot--a--b--10/.
func EntryPrefix(entryName string) string {
	return strings.TrimPrefix(entryName, SourcePrefix) + "/"
}

// EtcdMain is the shoot's etcd that etcd-druid backs up.
const EtcdMain = "etcd-main"

// EtcdMainPrefix is the store prefix etcd-druid gives etcd-backup-restore for the shoot's
// etcd-main: its snapshots land under <prefix>/v2/.
func EtcdMainPrefix(entryName string) string { return EntryPrefix(entryName) + EtcdMain }

// ProviderConfig is obj's spec.providerConfig, nil for none. gardenlet copies a BackupBucket's
// into its BackupEntries.
func ProviderConfig(obj extensionsv1alpha1.Object) []byte {
	if c := obj.GetExtensionSpec().GetProviderConfig(); c != nil {
		return c.Raw
	}
	return nil
}
