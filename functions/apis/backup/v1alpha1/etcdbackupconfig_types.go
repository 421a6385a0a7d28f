package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultKeep is how many backups an EtcdBackupConfig keeps when spec.keep is not set.
const DefaultKeep = 20

// Condition types of an EtcdBackupConfig.
const (
	// ConditionScheduled: the schedule is installed on the NATS server (True), or why not.
	ConditionScheduled = "Scheduled"
	// ConditionBackupSucceeded: the last run made (or found) its backup and rotated the old
	// ones (True), or why it could not.
	ConditionBackupSucceeded = "BackupSucceeded"
)

// Condition reasons.
const (
	ReasonScheduleInstalled  = "ScheduleInstalled"
	ReasonInvalidSchedule    = "InvalidSchedule"
	ReasonInvalidConfig      = "InvalidConfig"
	ReasonBackupTaken        = "BackupTaken"
	ReasonUnknownDestination = "UnknownDestination"
	ReasonInvalidDestination = "InvalidDestination"
	ReasonMissingCredentials = "MissingCredentials"
	ReasonInvalidTLS         = "InvalidTLS"
	ReasonEtcdUnreachable    = "EtcdUnreachable"
	ReasonSnapshotFailed     = "SnapshotFailed"
	ReasonStoreFailed        = "StoreFailed"
	ReasonVerificationFailed = "VerificationFailed"
	ReasonRotationFailed     = "RotationFailed"
)

// Finalizer is on every EtcdBackupConfig, RestoreDrill and BackupCopyPolicy whose schedule is
// installed: the schedule function removes the schedule from the NATS server before it lets the
// object go.
const Finalizer = "backup.housekeeper.dev/schedule"

// Keys of the secret named by spec.etcd.tlsSecretRef (those of a kubernetes.io/tls secret,
// plus the CA).
const (
	TLSKeyCA   = "ca.crt"
	TLSKeyCert = "tls.crt"
	TLSKeyKey  = "tls.key"
)

// EtcdBackupConfig takes backups of one etcd on a schedule and keeps the newest spec.keep of
// them under <namespace>/<name>/ in the destination's bucket.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ebc,categories=housekeeper
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Keep",type=integer,JSONPath=`.spec.keep`
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destination`
// +kubebuilder:printcolumn:name="Backups",type=integer,JSONPath=`.status.backupCount`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastBackup.time`
// +kubebuilder:printcolumn:name="Succeeded",type=string,JSONPath=`.status.conditions[?(@.type=="BackupSucceeded")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.status=="False")].reason`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextRun`,priority=1
type EtcdBackupConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdBackupConfigSpec `json:"spec"`
	// +optional
	Status EtcdBackupConfigStatus `json:"status,omitempty"`
}

// EtcdBackupConfigSpec is what to back up, when, how many to keep and where to.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || (has(self.schedule) && self.schedule.size() > 0 && !self.schedule.startsWith('@every'))",message="timeZone needs a cron schedule"
type EtcdBackupConfigSpec struct {
	// Etcd is the etcd to back up.
	Etcd EtcdReference `json:"etcd"`
	// Schedule is when backups are taken, as the NATS server's scheduler reads it: a 6-field
	// cron expression with seconds first ("0 */5 * * * *": every five minutes), a predefined
	// schedule (@hourly, @daily, ...) or "@every <duration>". Empty: one backup, now.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every [0-9a-z.]+$') || self.matches('^[^ ]+( [^ ]+){5}$')",messageExpression="'schedule ' + self + ' is not 6 cron fields with seconds first (0 */5 * * * * is every five minutes; a 5-field crontab line lacks the seconds), nor one of @hourly, @daily, @weekly, @monthly, @yearly, @every 1h30m'"
	Schedule string `json:"schedule,omitempty"`
	// TimeZone is the IANA time zone a cron schedule is read in (default UTC).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
	// Keep is how many backups are kept; the oldest beyond it are deleted after each backup.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Keep int32 `json:"keep,omitempty"`
	// Destination names the BackupDestination backups go to. It cannot change: restores
	// look for earlier backups where they were written.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="destination is immutable: earlier backups are restored from where they were written; create a new EtcdBackupConfig instead"
	Destination string `json:"destination"`
}

// EtcdReference is how to reach an etcd.
type EtcdReference struct {
	// Endpoints are the etcd client URLs (https://host:2379).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^(https?|unix|unixs)://`
	// +kubebuilder:validation:items:MaxLength=512
	Endpoints []string `json:"endpoints"`
	// TLSSecretRef names a secret in the config's namespace with ca.crt, and tls.crt and
	// tls.key for client authentication. Without it, the endpoints are spoken to in plain text
	// (http://) or with the system's roots (https://).
	// +optional
	TLSSecretRef *LocalObjectReference `json:"tlsSecretRef,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EtcdBackupConfigStatus is what the schedule and snapshot functions report.
type EtcdBackupConfigStatus struct {
	// ObservedGeneration is the generation the schedule was last installed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Scheduled and BackupSucceeded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastBackup is the newest backup taken.
	// +optional
	LastBackup *Backup `json:"lastBackup,omitempty"`
	// Backups are the backups kept, newest first.
	// +optional
	Backups []BackupReference `json:"backups,omitempty"`
	// BackupCount is len(backups).
	// +optional
	BackupCount int32 `json:"backupCount,omitempty"`
	// NextRun is when the schedule fires next, as the NATS server announced it with the last
	// fire.
	// +optional
	NextRun *metav1.Time `json:"nextRun,omitempty"`
}

// Backup describes one backup.
type Backup struct {
	// Key is the object's key in the destination's bucket.
	Key string `json:"key"`
	// Time is when the schedule fired for it (the key is derived from it).
	Time metav1.Time `json:"time"`
	// Size is the object's size in bytes, as the store reports it.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the object, computed while it was streamed.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Duration is how long the snapshot took, from etcd to the store.
	// +optional
	Duration metav1.Duration `json:"duration,omitempty"`
}

// BackupReference names a kept backup.
type BackupReference struct {
	Key  string      `json:"key"`
	Time metav1.Time `json:"time"`
}

// EtcdBackupConfigList is a list of EtcdBackupConfigs.
//
// +kubebuilder:object:root=true
type EtcdBackupConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupConfig `json:"items"`
}
