// Package v1alpha1 is housekeeper's own API, group backup.housekeeper.dev: where etcd backups
// go (BackupDestination, cluster-scoped), which etcd is backed up how often and how many
// backups are kept (EtcdBackupConfig, namespaced), and which BackupEntries' backups are
// restored on a schedule to prove they restore (RestoreDrill, cluster-scoped), and which
// BackupBuckets' backups get a second, verified copy in a BackupDestination
// (BackupCopyPolicy, cluster-scoped). It is a public contract: the bridge watches these
// objects, the schedule function installs the configs', the drills' and the policies'
// schedules, the snapshot function acts on the configs' fires, and the CRDs in
// infra/crds are generated from these types (scripts/generate-apis.sh).
//
// +kubebuilder:object:generate=true
// +groupName=backup.housekeeper.dev
package v1alpha1
