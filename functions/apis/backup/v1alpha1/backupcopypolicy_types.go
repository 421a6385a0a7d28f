package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a BackupCopyPolicy's spec, the same as its kubebuilder:default markers: code that
// reads a spec the API server has not defaulted uses these.
const (
	DefaultCopyConcurrency = 2
	DefaultLagObjective    = 24 * time.Hour
)

// Bounds of a BackupCopyPolicy's status, the same as its validation markers.
const (
	// MaxEntryCopyResults bounds status.results: a status must fit in an object of etcd's.
	MaxEntryCopyResults = 200
	// MaxCopyFailures bounds the failures kept per entry; the counts have the rest.
	MaxCopyFailures = 10
	// MaxCopyReasonLength and MaxCopyKeyLength bound a failure's reason and key, in characters.
	MaxCopyReasonLength = 512
	MaxCopyKeyLength    = 1024
)

// Condition types of a BackupCopyPolicy, besides ConditionScheduled (the schedule is installed
// on the NATS server, or why not).
const (
	// ConditionCopiesSucceeded: every entry of the last run is in the copy, verified (True),
	// or how many are not and why.
	ConditionCopiesSucceeded = "CopiesSucceeded"
	// ConditionWithinLagObjective: no copied entry is further behind its source than
	// spec.lagObjective (True), or how many are.
	ConditionWithinLagObjective = "WithinLagObjective"
	// ConditionFailedOver: the entries' etcd-backup secrets point at the destination (True,
	// reason FailedOver or Returning), or at their buckets (False, reason Returned).
	ConditionFailedOver = "FailedOver"
)

// Phases of a fail-over (status.failOver.phase), also the FailedOver condition's reasons.
const (
	// FailOverActive: spec.failOver is set; etcd-backup-restore backs up into the destination
	// and nothing is copied to it.
	FailOverActive = "FailedOver"
	// FailOverReturning: spec.failOver was unset; what was written to the destination is being
	// copied back to the buckets, and the secrets keep pointing at the destination until it is.
	FailOverReturning = "Returning"
	// FailOverReturned: the copy back is done and the secrets point at the buckets again.
	FailOverReturned = "Returned"
)

// Reasons of the CopiesSucceeded and WithinLagObjective conditions.
const (
	// ReasonAllCopied: every entry of the last run is in the copy, verified.
	ReasonAllCopied = "AllCopied"
	// ReasonNothingToCopy: the policy selects no BackupEntry.
	ReasonNothingToCopy = "NothingToCopy"
	// ReasonCopiesFailed: some entries are not wholly in the copy; the message counts them
	// and gives the first reasons.
	ReasonCopiesFailed = "CopiesFailed"
	// ReasonInvalidPolicy: the policy cannot run as it is (a selector labels cannot evaluate,
	// a destination missing or unusable); nothing was copied.
	ReasonInvalidPolicy = "InvalidPolicy"
	// ReasonWithinObjective and ReasonBehindObjective say whether every entry's lag is within
	// spec.lagObjective.
	ReasonWithinObjective = "WithinObjective"
	ReasonBehindObjective = "BehindObjective"
)

// BackupCopyPolicy keeps a second, verified copy of the etcd backups of the BackupEntries in
// the BackupBuckets it selects, in a BackupDestination: on a schedule (and on demand, with the
// annotation gardener.cloud/operation: reconcile), every object under each entry's prefix that
// the copy lacks is copied under the same key and verified; an object the copy holds with
// other content is reported and kept. The first store is only read, but for the return from a
// fail-over (spec.failOver).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bcp,categories=housekeeper
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destination`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Entries",type=integer,JSONPath=`.status.entries`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Behind",type=integer,JSONPath=`.status.behind`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastRun`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="CopiesSucceeded")].status`
// +kubebuilder:printcolumn:name="Fail-over",type=string,JSONPath=`.status.failOver.phase`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextRun`,priority=1
type BackupCopyPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackupCopyPolicySpec `json:"spec"`
	// +optional
	Status BackupCopyPolicyStatus `json:"status,omitempty"`
}

// BackupCopyPolicySpec is whose backups are copied, where to, when, and with how much at once.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || !self.schedule.startsWith('@every')",message="timeZone needs a cron schedule"
type BackupCopyPolicySpec struct {
	// Buckets picks the BackupBuckets whose BackupEntries' backups are copied.
	Buckets BucketSelection `json:"buckets"`
	// Destination names the BackupDestination the copy goes to, under the same keys as in the
	// entries' buckets (<entry name>/...). Give the copy a bucket of its own.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Destination string `json:"destination"`
	// LagObjective is how far behind its source an entry's copy may be: the time since a run
	// last found every object of the entry in the copy, verified. An entry further behind is
	// counted in status.behind and turns WithinLagObjective False.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",messageExpression="'lagObjective ' + self + ' is not a positive duration'"
	LagObjective *metav1.Duration `json:"lagObjective,omitempty"`
	// Schedule is when the copies run, as the NATS server's scheduler reads it: a 6-field cron
	// expression with seconds first ("0 0 * * * *": hourly), a predefined schedule (@hourly,
	// ...) or "@every <duration>".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every [0-9a-z.]+$') || self.matches('^[^ ]+( [^ ]+){5}$')",messageExpression="'schedule ' + self + ' is not 6 cron fields with seconds first (0 0 * * * * is hourly; a 5-field crontab line lacks the seconds), nor one of @hourly, @daily, @weekly, @monthly, @yearly, @every 1h'"
	Schedule string `json:"schedule"`
	// TimeZone is the IANA time zone a cron schedule is read in (default UTC).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
	// Concurrency is how many entries are copied at once (each copies a few objects at once).
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	Concurrency int32 `json:"concurrency,omitempty"`
	// FailOver, set when the selected buckets are lost, points every selected entry's
	// etcd-backup secret at the destination: etcd-backup-restore backs up into the copy and
	// restores from it once gardenlet's next reconcile of the shoot has redeployed its etcd.
	// Only entries whose provider type is the destination's can be switched (gardenlet takes the
	// provider from the seed's backup settings, the bucket from the secret); the others keep
	// their bucket and the FailedOver condition names them. Unset it to return: what was written
	// to the destination meanwhile is copied back to each bucket, then the secrets point at the
	// buckets again.
	// +optional
	FailOver bool `json:"failOver,omitempty"`
}

// FailedOver says whether the selected entries' etcd-backup secrets point at the destination:
// while spec.failOver is set, and after it is unset until the copy back is done.
func (p *BackupCopyPolicy) FailedOver() bool {
	return p.Spec.FailOver || p.Status.FailOver != nil
}

// EffectiveLagObjective is spec.lagObjective, or DefaultLagObjective where unset: the copy
// function counts entries behind by it and the bridge exports it for the alert.
func (s BackupCopyPolicySpec) EffectiveLagObjective() time.Duration {
	if o := s.LagObjective; o != nil && o.Duration > 0 {
		return o.Duration
	}
	return DefaultLagObjective
}

// EffectiveConcurrency is spec.concurrency, or DefaultCopyConcurrency where unset: how many
// entries a run copies, or copies back, at once.
func (s BackupCopyPolicySpec) EffectiveConcurrency() int {
	if s.Concurrency > 0 {
		return int(s.Concurrency)
	}
	return DefaultCopyConcurrency
}

// BucketSelection picks BackupBuckets. Each field set narrows the choice: a bucket is picked
// when it matches every one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.names) || has(self.selector) || has(self.types)",message="choose the BackupBuckets with names, selector or types"
type BucketSelection struct {
	// Names picks the BackupBuckets of these names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`
	// Selector picks the BackupBuckets by their labels.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Types picks the BackupBuckets of these provider types (spec.type: azure, aws, gcp,
	// openstack, local).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	Types []string `json:"types,omitempty"`
}

// BackupCopyPolicyStatus is what the last runs found.
type BackupCopyPolicyStatus struct {
	// ObservedGeneration is the generation the schedule was last installed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Scheduled, CopiesSucceeded, WithinLagObjective and FailedOver.
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
	// Entries is how many BackupEntries the policy selects.
	// +optional
	Entries int32 `json:"entries,omitempty"`
	// Failed is how many of them are not wholly in the copy after their last run.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Behind is how many of them are further behind than spec.lagObjective.
	// +optional
	Behind int32 `json:"behind,omitempty"`
	// Results are the entries' last copies, failures first, then the furthest behind; beyond
	// the bound the entries least behind are left out (the counts have them).
	// +optional
	// +listType=map
	// +listMapKey=entry
	// +kubebuilder:validation:MaxItems=200
	Results []EntryCopyResult `json:"results,omitempty"`
	// FailOver is set while the entries' etcd-backup secrets point at the destination.
	// +optional
	FailOver *FailOverStatus `json:"failOver,omitempty"`
}

// FailOverStatus is a fail-over to the destination, as the copy function carries it out.
type FailOverStatus struct {
	// Since is when the copy function first saw spec.failOver set.
	Since metav1.Time `json:"since"`
	// Phase is FailedOver while spec.failOver is set, Returning once it is unset and until
	// what was written to the destination is copied back to the buckets.
	// +kubebuilder:validation:Enum=FailedOver;Returning
	Phase string `json:"phase"`
}

// EntryCopyResult is the last copy of one BackupEntry's backups.
type EntryCopyResult struct {
	// Entry is the BackupEntry's name; its backups are under <entry>/.
	// +kubebuilder:validation:MaxLength=253
	Entry string `json:"entry"`
	// Bucket is the entry's BackupBucket.
	// +kubebuilder:validation:MaxLength=253
	Bucket string `json:"bucket"`
	// Time is when the entry's last copy started.
	Time metav1.Time `json:"time"`
	// Duration is how long it took.
	// +optional
	Duration metav1.Duration `json:"duration,omitempty"`
	// Complete says whether the last copy found every object of the entry in the copy,
	// verified.
	Complete bool `json:"complete"`
	// LastComplete is when the entry's last complete copy started.
	// +optional
	LastComplete *metav1.Time `json:"lastComplete,omitempty"`
	// Lag is how far behind its source the copy was at the last run: time since LastComplete
	// (since the entry was created, before its first complete copy); 0 when complete.
	// +optional
	Lag metav1.Duration `json:"lag,omitempty"`
	// Newest is the key of the newest object copied (etcd-backup-restore's snapshots by last
	// revision); it is kept until a later run copies a newer one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Newest string `json:"newest,omitempty"`
	// Objects and Bytes are what the last copy wrote; Skipped how many objects the copy held
	// already, verified.
	// +optional
	Objects int64 `json:"objects,omitempty"`
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// Differing counts the objects the copy holds with content other than the source's: kept,
	// not overwritten (a person decides which side is right). FailedObjects counts those that
	// could not be copied.
	// +optional
	Differing int64 `json:"differing,omitempty"`
	// +optional
	FailedObjects int64 `json:"failedObjects,omitempty"`
	// Reason says why the copy is not complete.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
	// Failures name the first differing or failed objects and why, by key.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Failures []CopyFailure `json:"failures,omitempty"`
}

// CopyFailure is one object that is not in the copy as the source holds it.
type CopyFailure struct {
	// Key is the object's key.
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key"`
	// Reason says what is wrong: both sizes and checksums for an object that differs, the
	// store's error for one that failed.
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason"`
}

// BackupCopyPolicyList is a list of BackupCopyPolicies.
//
// +kubebuilder:object:root=true
type BackupCopyPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupCopyPolicy `json:"items"`
}
