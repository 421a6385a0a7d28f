package events

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is the Kubernetes kind an event is about.
type Kind string

const (
	KindBackupBucket Kind = "BackupBucket"
	KindBackupEntry  Kind = "BackupEntry"
	// KindEtcdBackupConfig is housekeeper's own backup.housekeeper.dev kind; it is namespaced,
	// so its events name it "<namespace>/<name>".
	KindEtcdBackupConfig Kind = "EtcdBackupConfig"
	// KindRestoreDrill is housekeeper's restore drill kind; it is cluster-scoped, so its events
	// name it by its name alone.
	KindRestoreDrill Kind = "RestoreDrill"
	// KindBackupCopyPolicy is housekeeper's copy policy kind; it is cluster-scoped, so its
	// events name it by its name alone.
	KindBackupCopyPolicy Kind = "BackupCopyPolicy"
)

// Operation is what happened; with the kind it makes the event type.
type Operation string

const (
	OpCreated  Operation = "created"
	OpUpdated  Operation = "updated"
	OpDeleting Operation = "deleting" // deletionTimestamp set, finalizers pending
	OpDeleted  Operation = "deleted"  // gone from the API server
	OpSynced   Operation = "synced"   // initial list, relist or resync: state unchanged

	OpPurgeScheduled Operation = "scheduled"
	OpPurgeDue       Operation = "due"
	OpPurgeCompleted Operation = "completed"
	OpPurgeFailed    Operation = "failed"
	// OpPurgeVerify is a follow-up purge, due when the locks of the objects a purge could
	// only mark have ended; OpPurgeVerified is its outcome.
	OpPurgeVerify   Operation = "verify"
	OpPurgeVerified Operation = "verified"
)

// typePrefix is the reverse-DNS namespace of housekeeper's event types.
const typePrefix = "dev.housekeeper."

// Event types: reverse-DNS and versioned. A breaking change to an event's data is a new version.
const (
	TypeBucketCreated  = typePrefix + "backupbucket.created.v1"
	TypeBucketUpdated  = typePrefix + "backupbucket.updated.v1"
	TypeBucketDeleting = typePrefix + "backupbucket.deleting.v1"
	TypeBucketDeleted  = typePrefix + "backupbucket.deleted.v1"
	TypeBucketSynced   = typePrefix + "backupbucket.synced.v1"

	TypeEntryCreated  = typePrefix + "backupentry.created.v1"
	TypeEntryUpdated  = typePrefix + "backupentry.updated.v1"
	TypeEntryDeleting = typePrefix + "backupentry.deleting.v1"
	TypeEntryDeleted  = typePrefix + "backupentry.deleted.v1"
	TypeEntrySynced   = typePrefix + "backupentry.synced.v1"

	TypePurgeScheduled = typePrefix + "purge.scheduled.v1"
	TypePurgeDue       = typePrefix + "purge.due.v1"
	TypePurgeCompleted = typePrefix + "purge.completed.v1"
	TypePurgeFailed    = typePrefix + "purge.failed.v1"
	TypePurgeVerify    = typePrefix + "purge.verify.v1"
	TypePurgeVerified  = typePrefix + "purge.verified.v1"

	TypeEtcdBackupConfigCreated  = typePrefix + "etcdbackupconfig.created.v1"
	TypeEtcdBackupConfigUpdated  = typePrefix + "etcdbackupconfig.updated.v1"
	TypeEtcdBackupConfigDeleting = typePrefix + "etcdbackupconfig.deleting.v1"
	TypeEtcdBackupConfigDeleted  = typePrefix + "etcdbackupconfig.deleted.v1"
	TypeEtcdBackupConfigSynced   = typePrefix + "etcdbackupconfig.synced.v1"

	// TypeEtcdBackupDue is an EtcdBackupConfig's schedule firing: take a backup now. It is
	// published only as the payload of a schedule (EtcdBackupScheduleSubject).
	TypeEtcdBackupDue = typePrefix + "etcdbackup.due.v1"

	TypeRestoreDrillCreated  = typePrefix + "restoredrill.created.v1"
	TypeRestoreDrillUpdated  = typePrefix + "restoredrill.updated.v1"
	TypeRestoreDrillDeleting = typePrefix + "restoredrill.deleting.v1"
	TypeRestoreDrillDeleted  = typePrefix + "restoredrill.deleted.v1"
	TypeRestoreDrillSynced   = typePrefix + "restoredrill.synced.v1"

	// TypeDrillDue is a RestoreDrill's schedule firing: run the drill now. It is published only
	// as the payload of a schedule (DrillScheduleSubject).
	TypeDrillDue = typePrefix + "drill.due.v1"

	TypeBackupCopyPolicyCreated  = typePrefix + "backupcopypolicy.created.v1"
	TypeBackupCopyPolicyUpdated  = typePrefix + "backupcopypolicy.updated.v1"
	TypeBackupCopyPolicyDeleting = typePrefix + "backupcopypolicy.deleting.v1"
	TypeBackupCopyPolicyDeleted  = typePrefix + "backupcopypolicy.deleted.v1"
	TypeBackupCopyPolicySynced   = typePrefix + "backupcopypolicy.synced.v1"

	// TypeCopyDue is a BackupCopyPolicy's schedule firing: copy now. It is published only as
	// the payload of a schedule (CopyScheduleSubject).
	TypeCopyDue = typePrefix + "copy.due.v1"
)

// Types lists every event type of the contract.
var Types = []string{
	TypeBucketCreated, TypeBucketUpdated, TypeBucketDeleting, TypeBucketDeleted, TypeBucketSynced,
	TypeEntryCreated, TypeEntryUpdated, TypeEntryDeleting, TypeEntryDeleted, TypeEntrySynced,
	TypePurgeScheduled, TypePurgeDue, TypePurgeCompleted, TypePurgeFailed, TypePurgeVerify, TypePurgeVerified,
	TypeEtcdBackupConfigCreated, TypeEtcdBackupConfigUpdated, TypeEtcdBackupConfigDeleting, TypeEtcdBackupConfigDeleted, TypeEtcdBackupConfigSynced,
	TypeEtcdBackupDue,
	TypeRestoreDrillCreated, TypeRestoreDrillUpdated, TypeRestoreDrillDeleting, TypeRestoreDrillDeleted, TypeRestoreDrillSynced,
	TypeDrillDue,
	TypeBackupCopyPolicyCreated, TypeBackupCopyPolicyUpdated, TypeBackupCopyPolicyDeleting, TypeBackupCopyPolicyDeleted, TypeBackupCopyPolicySynced,
	TypeCopyDue,
}

var knownTypes = func() map[string]bool {
	m := make(map[string]bool, len(Types))
	for _, t := range Types {
		m[t] = true
	}
	return m
}()

// IsKnownType reports whether t is an event type of this contract.
func IsKnownType(t string) bool { return knownTypes[t] }

// AuditTypes are the reports of what a function did: no function consumes them, so they are
// stored in AuditStream, below their own subject root.
var AuditTypes = []string{TypePurgeScheduled, TypePurgeCompleted, TypePurgeFailed, TypePurgeVerified}

// IsAudit reports whether t is one of AuditTypes.
func IsAudit(t string) bool { return slices.Contains(AuditTypes, t) }

// ObjectType returns the event type for an operation on a BackupBucket, BackupEntry,
// EtcdBackupConfig, RestoreDrill or BackupCopyPolicy.
func ObjectType(kind Kind, op Operation) (string, error) {
	t := typePrefix + strings.ToLower(string(kind)) + "." + string(op) + ".v1"
	if !knownTypes[t] || slices.ContainsFunc(nonObjectGroups, func(g string) bool { return strings.HasPrefix(t, typePrefix+g+".") }) {
		return "", fmt.Errorf("%w: no event for %s %s", ErrUnknownType, kind, op)
	}
	return t, nil
}

// OperationOf is the operation an event type names (its part between the group and the
// version), or false for a type of another contract.
func OperationOf(eventType string) (Operation, bool) {
	if !knownTypes[eventType] {
		return "", false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(eventType, typePrefix), ".v1")
	return Operation(rest[strings.LastIndex(rest, ".")+1:]), true
}

// nonObjectGroups are the type groups that name no kind: their events are built by their own
// constructors (NewPurgeEvent, NewEtcdBackupDueEvent, NewDrillDueEvent, NewCopyDueEvent), never as
// object events.
var nonObjectGroups = []string{"purge", "etcdbackup", "drill", "copy"}

// PurgeType returns the event type for a purge operation.
func PurgeType(op Operation) (string, error) {
	t := typePrefix + "purge." + string(op) + ".v1"
	if !knownTypes[t] {
		return "", fmt.Errorf("%w: no purge event for %s", ErrUnknownType, op)
	}
	return t, nil
}
