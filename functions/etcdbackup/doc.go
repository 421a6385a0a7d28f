// Package etcdbackup holds the two functions behind EtcdBackupConfig
// (backup.housekeeper.dev/v1alpha1), the first of which schedules RestoreDrills and
// BackupCopyPolicies too:
//
//   - schedule installs the config's schedule on the NATS server — a cron, an interval, or a
//     single "@at" for a config without one — on one schedule subject per config, replaces it
//     when the config changes and purges it when the config is deleted (finalizer
//     backup.housekeeper.dev/schedule). It does the same for each RestoreDrill, whose schedule
//     (a cron or an interval) fires its drill.due events, and for each BackupCopyPolicy, whose
//     schedule fires copy.due. Nothing waits in memory between runs.
//   - snapshot runs on each fire: it streams a snapshot from etcd straight into the
//     destination's store under <namespace>/<name>/<fire time>.db, verifies it (etcd's own
//     SHA-256 trailer, the size the store reports), deletes the oldest backups beyond
//     spec.keep under that prefix and nothing else, and reports status.
//
// Bad input (an unknown destination, missing credentials, bad TLS material, an unreachable
// etcd, a schedule the server refuses) becomes a condition on the config and is not retried:
// the next fire, or the next change of the config, tries again.
package etcdbackup
