package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a RestoreDrill's spec, the same as its kubebuilder:default markers: code that
// reads a spec the API server has not defaulted (a test's, a dry run's) uses these.
const (
	DefaultDrillConcurrency  = 1
	DefaultDrillMemoryBudget = "512Mi"
	DefaultMaxRestorableAge  = 24 * time.Hour
	DefaultDrillTimeout      = 30 * time.Minute
)

// Bounds of a RestoreDrill, the same as its validation markers.
const (
	// MinDrillMemoryBudget is the least memoryBudget admitted: what one drill needs.
	MinDrillMemoryBudget = "64Mi"
	// MaxEntryDrillResults bounds status.results: a status must fit in an object of etcd's.
	MaxEntryDrillResults = 200
	// MaxEntryDrillReasonLength and MaxEntryDrillObjectLength bound a result's reason and
	// object, in characters.
	MaxEntryDrillReasonLength = 512
	MaxEntryDrillObjectLength = 1024
)

// Condition types of a RestoreDrill, besides ConditionScheduled (the schedule is installed on
// the NATS server, or why not).
const (
	// ConditionDrillsSucceeded: every entry drilled in the last run restored (True), or how
	// many did not and why.
	ConditionDrillsSucceeded = "DrillsSucceeded"
)

// Reasons of the DrillsSucceeded condition.
const (
	// ReasonAllRestorable: every entry drilled in the last run passed (Exact or Restorable).
	ReasonAllRestorable = "AllRestorable"
	// ReasonNothingToDrill: the drill selects no BackupEntry and no EtcdBackupConfig.
	ReasonNothingToDrill = "NothingToDrill"
	// ReasonDrillsFailed: some entries drilled in the last run did not restore, could not be
	// judged, or could not be verified against the live etcd; the message counts them and
	// gives the first reasons.
	ReasonDrillsFailed = "DrillsFailed"
	// ReasonInvalidDrill: the spec cannot run as it is (no way to choose the entries, a memory
	// budget too small for its concurrency); nothing was drilled.
	ReasonInvalidDrill = "InvalidDrill"
)

// Outcomes of one entry's drill.
const (
	// OutcomeExact: the entry's latest chain of snapshots restored and checked out, the live
	// etcd holds the same store at the restored revision (live.outcome Matches), and the
	// restore that runs on the day restored it too: for a BackupEntry etcd-backup-restore's
	// own, which ran and agreed; for an EtcdBackupConfig etcdutl's snapshot restore, which the
	// drill runs itself.
	OutcomeExact = "Exact"
	// OutcomeRestorable: the entry's latest chain of snapshots restored and checked out; the
	// live etcd was not compared (live.outcome says why), or it matched but etcd-backup-
	// restore's restore was not run (the reason says why).
	OutcomeRestorable = "Restorable"
	// OutcomeUnverified: the backups restored, but the live etcd, reachable, could no longer
	// be compared at the restored revision (live.outcome Compacted): not a pass.
	OutcomeUnverified = "Unverified"
	// OutcomeNotRestorable: the drill found the backup at fault: it would not restore (a
	// checksum that does not match, a revision gap, a truncated or corrupt snapshot, ...), or
	// it restores another store than the live etcd holds at the restored revision.
	OutcomeNotRestorable = "NotRestorable"
	// OutcomeError: the drill could not judge (the store unreachable, its own etcd failing,
	// its timeout); it says nothing about the backup.
	OutcomeError = "Error"
)

// Passed says whether a drill with outcome passed: Exact or Restorable.
func Passed(outcome string) bool { return outcome == OutcomeExact || outcome == OutcomeRestorable }

// EffectiveMaxRestorableAge is spec.maxRestorableAge, or DefaultMaxRestorableAge where unset: the
// drill function counts stale entries by it and the bridge exports it for the alert.
func (s RestoreDrillSpec) EffectiveMaxRestorableAge() time.Duration {
	if a := s.MaxRestorableAge; a != nil && a.Duration > 0 {
		return a.Duration
	}
	return DefaultMaxRestorableAge
}

// Outcomes of comparing a drill's restored store with the live etcd.
const (
	// LiveMatches: the live etcd holds the restored store at the restored revision (its
	// HashKV, or where that cannot decide, every key, value and mod revision).
	LiveMatches = "Matches"
	// LiveDiffers: it holds other keys, values or mod revisions there, or has not reached the
	// revision: the entry is NotRestorable.
	LiveDiffers = "Differs"
	// LiveCompacted: it has compacted past the restored revision: nothing to compare with.
	LiveCompacted = "Compacted"
	// LiveUnreachable: it did not answer.
	LiveUnreachable = "Unreachable"
	// LiveNotConfigured: the drill knows no live etcd for these backups.
	LiveNotConfigured = "NotConfigured"
)

// RestoreDrill restores the latest backups of the BackupEntries and EtcdBackupConfigs it
// selects, on a schedule, each into a throwaway etcd (as `housekeeper drill` does for one), and
// reports for each whether they restore: a backup is only as good as its last restore.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rdrill,categories=housekeeper
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Entries",type=integer,JSONPath=`.status.entries`
// +kubebuilder:printcolumn:name="Restorable",type=integer,JSONPath=`.status.restorable`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Stale",type=integer,JSONPath=`.status.stale`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastRun`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="DrillsSucceeded")].status`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextRun`,priority=1
type RestoreDrill struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RestoreDrillSpec `json:"spec"`
	// +optional
	Status RestoreDrillStatus `json:"status,omitempty"`
}

// RestoreDrillSpec is which backups are drilled, when, and with how much at once.
//
// +kubebuilder:validation:XValidation:rule="[has(self.selector), has(self.purposes), has(self.all) && self.all].filter(x, x).size() <= 1",message="choose the BackupEntries to drill with at most one of selector, purposes or all: true"
// +kubebuilder:validation:XValidation:rule="has(self.selector) || has(self.purposes) || (has(self.all) && self.all) || has(self.configs)",message="nothing to drill: choose BackupEntries with one of selector, purposes or all: true, EtcdBackupConfigs with configs, or both"
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || !self.schedule.startsWith('@every')",message="timeZone needs a cron schedule"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.source == 'Bucket' || has(self.copyPolicy)",message="source Copy or Both needs copyPolicy: the BackupCopyPolicy whose destination holds the copy"
// +kubebuilder:validation:XValidation:rule="!has(self.copyPolicy) || (has(self.source) && self.source != 'Bucket')",message="copyPolicy needs source Copy or Both"
type RestoreDrillSpec struct {
	// Selector picks the BackupEntries by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Purposes picks the BackupEntries of shoots with these purposes: the purpose housekeeper
	// records from the shoot's Cluster, or the entry's shoot.gardener.cloud/purpose annotation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=evaluation;testing;development;production;infrastructure
	Purposes []string `json:"purposes,omitempty"`
	// All picks every BackupEntry.
	// +optional
	All bool `json:"all,omitempty"`
	// Configs picks EtcdBackupConfigs: the newest backup each keeps in its destination is
	// drilled too.
	// +optional
	Configs *ConfigSelection `json:"configs,omitempty"`
	// Source is which store a BackupEntry's backups are drilled in: Bucket (the default), the
	// entry's own bucket; Copy, the copy copyPolicy keeps of them (its BackupDestination, at
	// <entry>/); Both, the bucket and then the copy, compared. EtcdBackupConfigs are drilled in
	// their destination whatever it says.
	// +optional
	// +kubebuilder:validation:Enum=Bucket;Copy;Both
	Source string `json:"source,omitempty"`
	// CopyPolicy names the BackupCopyPolicy whose copy source Copy or Both drills.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CopyPolicy string `json:"copyPolicy,omitempty"`
	// Schedule is when the drills run, as the NATS server's scheduler reads it: a 6-field cron
	// expression with seconds first ("0 0 3 * * *": at 03:00), a predefined schedule (@daily,
	// ...) or "@every <duration>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every [0-9a-z.]+$') || self.matches('^[^ ]+( [^ ]+){5}$')",messageExpression="'schedule ' + self + ' is not 6 cron fields with seconds first (0 0 3 * * * is at 03:00; a 5-field crontab line lacks the seconds), nor one of @hourly, @daily, @weekly, @monthly, @yearly, @every 12h'"
	Schedule string `json:"schedule"`
	// TimeZone is the IANA time zone a cron schedule is read in (default UTC).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
	// Concurrency is how many drills run at once; each holds a throwaway etcd and its files.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Concurrency int32 `json:"concurrency,omitempty"`
	// MemoryBudget is the memory the drills of one run may use in all; each of the concurrent
	// drills gets memoryBudget/concurrency. 64Mi is what one drill needs at least.
	// +optional
	// +kubebuilder:default="512Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('64Mi')) >= 0",messageExpression="'memoryBudget ' + string(self) + ' is below 64Mi, what one drill needs'"
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
	// MaxRestorableAge is how old an entry's newest restorable point may be: an entry whose
	// newest point a drill restored is older (its backups stopped, or its drills fail) is
	// counted in status.stale, to alert on.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",messageExpression="'maxRestorableAge ' + self + ' is not a positive duration'"
	MaxRestorableAge *metav1.Duration `json:"maxRestorableAge,omitempty"`
	// Timeout bounds one entry's drill; one that runs longer is an Error, not a verdict on the
	// backup.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",messageExpression="'timeout ' + self + ' is not a positive duration'"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// ConfigSelection picks EtcdBackupConfigs; empty, it picks every one.
type ConfigSelection struct {
	// Namespaces picks the configs of these namespaces; unset, of every namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
	// Selector picks the configs by their labels; unset, every config of those namespaces.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Sources of a RestoreDrill: which store its BackupEntries' drills read.
const (
	// DrillBucket: each entry's own bucket.
	DrillBucket = "Bucket"
	// DrillCopy: the copy spec.copyPolicy keeps, in its BackupDestination.
	DrillCopy = "Copy"
	// DrillBoth: the bucket, then the copy, and the two compared.
	DrillBoth = "Both"
)

// Kinds of what a result is about.
const (
	// DrilledBackupEntry: Entry names a BackupEntry, whose etcd-main backups were drilled.
	DrilledBackupEntry = "BackupEntry"
	// DrilledEtcdBackupConfig: Entry is an EtcdBackupConfig's namespace/name, whose newest
	// backup in its destination was drilled.
	DrilledEtcdBackupConfig = "EtcdBackupConfig"
)

// RestoreDrillStatus is what the last runs found.
type RestoreDrillStatus struct {
	// ObservedGeneration is the generation the schedule was last installed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Scheduled and DrillsSucceeded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastRun is when the last run started.
	// +optional
	LastRun *metav1.Time `json:"lastRun,omitempty"`
	// NextRun is when the schedule fires next.
	// +optional
	NextRun *metav1.Time `json:"nextRun,omitempty"`
	// Entries is how many BackupEntries and EtcdBackupConfigs the drill selects.
	// +optional
	Entries int32 `json:"entries,omitempty"`
	// Restorable is how many of them passed (Exact or Restorable) in their last drill.
	// +optional
	Restorable int32 `json:"restorable,omitempty"`
	// Failed is how many of them did not (NotRestorable, Unverified or Error) in their last
	// drill.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Stale is how many of them have no point a drill restored within maxRestorableAge of
	// lastRun: the entries to alert on.
	// +optional
	Stale int32 `json:"stale,omitempty"`
	// Results are their last drills, failures first, then the successes drilled
	// longest ago; beyond the bound the newest successes are left out (the counts have them).
	// +optional
	// +listType=map
	// +listMapKey=entry
	// +kubebuilder:validation:MaxItems=200
	Results []EntryDrillResult `json:"results,omitempty"`
}

// EntryDrillResult is the last drill of a BackupEntry's or an EtcdBackupConfig's backups.
type EntryDrillResult struct {
	// Entry is the BackupEntry's name, or the EtcdBackupConfig's namespace/name.
	// +kubebuilder:validation:MaxLength=317
	Entry string `json:"entry"`
	// Kind is what Entry names: BackupEntry (also when unset) or EtcdBackupConfig.
	// +optional
	// +kubebuilder:validation:Enum=BackupEntry;EtcdBackupConfig
	Kind string `json:"kind,omitempty"`
	// Shoot is the shoot's control-plane namespace, when the entry's name says it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Shoot string `json:"shoot,omitempty"`
	// Outcome: Exact (restored, the live etcd holds the same store, and for a BackupEntry
	// etcd-backup-restore's own restore agreed), Restorable (restored; the live etcd not
	// compared, or etcd-backup-restore's restore not run), Unverified (restored, the live etcd
	// no longer holds the revision), NotRestorable (the backup is at fault) or Error (the drill
	// could not judge).
	// +kubebuilder:validation:Enum=Exact;Restorable;Unverified;NotRestorable;Error
	Outcome string `json:"outcome"`
	// Time is when the drill started.
	Time metav1.Time `json:"time"`
	// Duration is how long it took.
	// +optional
	Duration metav1.Duration `json:"duration,omitempty"`
	// RestoredRevision is the etcd revision the backups restored to.
	// +optional
	RestoredRevision int64 `json:"restoredRevision,omitempty"`
	// NewestRestorablePoint is when the newest snapshot a drill of this entry restored was
	// taken. A failed drill keeps the point of the last one that restored, so its age says
	// how long the entry has gone without a proven restore.
	// +optional
	NewestRestorablePoint *metav1.Time `json:"newestRestorablePoint,omitempty"`
	// Keys is how many keys the restored store holds.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// Bytes is the restored db's size.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// Hash is the hex SHA-256 over the restored keys and values, to compare with the source's.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash,omitempty"`
	// Reason says why the drill failed, or why it passed Restorable rather than Exact where
	// the live etcd matched.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
	// RealRestore says whether etcd-backup-restore's own restore, run on the same backups,
	// restored the same keys and values, or why it was not run or does not apply.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RealRestore string `json:"realRestore,omitempty"`
	// Object is the key of the snapshot at fault, when the failure is about one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Object string `json:"object,omitempty"`
	// Live is how the restored store compares with the live etcd, and how far behind it the
	// backups are; unset when the drill failed before restoring.
	// +optional
	Live *LiveComparison `json:"live,omitempty"`
	// Source is the store drilled when it is not the entry's own bucket: copy/<policy>, the
	// copy a BackupCopyPolicy keeps (spec.source Copy).
	// +optional
	// +kubebuilder:validation:MaxLength=258
	Source string `json:"source,omitempty"`
	// Copy is the drill of the copy beside the bucket's (spec.source Both), and how the two
	// compare. The entry's outcome, reason and object are the copy's where its drill did worse;
	// NotRestorable where the copy restores other keys or values at the bucket's revision.
	// +optional
	Copy *CopyDrillResult `json:"copy,omitempty"`
}

// CopyDrillResult is the drill of a BackupEntry's copy run after the drill of its bucket, and
// how the two compare. Restored at the bucket's revision, the copy must hold the same keys and
// values (else the result is NotRestorable, naming the copy); restored at an older revision,
// the copy lags behind the bucket: not a failure.
type CopyDrillResult struct {
	// Source is copy/<policy>.
	// +kubebuilder:validation:MaxLength=258
	Source string `json:"source"`
	// Outcome is the copy's own drill's: Exact, Restorable, Unverified, NotRestorable or Error.
	// +kubebuilder:validation:Enum=Exact;Restorable;Unverified;NotRestorable;Error
	Outcome string `json:"outcome"`
	// RestoredRevision, NewestRestorablePoint, Keys and Hash are what the copy restored to.
	// +optional
	RestoredRevision int64 `json:"restoredRevision,omitempty"`
	// +optional
	NewestRestorablePoint *metav1.Time `json:"newestRestorablePoint,omitempty"`
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash,omitempty"`
	// BehindRevisions is the bucket's restored revision less the copy's, when the copy
	// restored an older one: its lag.
	// +optional
	BehindRevisions int64 `json:"behindRevisions,omitempty"`
	// Reason says why the copy's drill failed, how it differs from the bucket's, or why the
	// two were not compared.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
	// Object is the key of the copy's snapshot at fault, when its failure is about one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Object string `json:"object,omitempty"`
}

// LiveComparison is a drill's restored store beside the live etcd it was backed up from.
type LiveComparison struct {
	// Outcome: Matches, Differs, Compacted (past the restored revision), Unreachable or
	// NotConfigured.
	// +kubebuilder:validation:Enum=Matches;Differs;Compacted;Unreachable;NotConfigured
	Outcome string `json:"outcome"`
	// Revision is the live etcd's revision when the drill asked it.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// BehindRevisions is Revision less the restored revision: the revisions a restore would
	// lose (the recovery point, in revisions).
	// +optional
	BehindRevisions int64 `json:"behindRevisions,omitempty"`
	// BehindSeconds is how long before the comparison the newest restorable point was taken
	// (the recovery point, in time).
	// +optional
	BehindSeconds int64 `json:"behindSeconds,omitempty"`
	// Reason says what was compared and found, or why nothing was; keys, never values.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}

// RestoreDrillList is a list of RestoreDrills.
//
// +kubebuilder:object:root=true
type RestoreDrillList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RestoreDrill `json:"items"`
}
