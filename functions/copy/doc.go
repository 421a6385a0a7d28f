// Package copy is the copy function: when the NATS server fires a BackupCopyPolicy's schedule
// (or the policy is annotated gardener.cloud/operation: reconcile), it copies every object
// under the prefix of each BackupEntry of the BackupBuckets the policy selects into the
// policy's BackupDestination, under the same key, verified (replica.Copy: server-side where the
// bucket and the destination are of one provider and the destination's store can copy from
// the bucket, streamed otherwise), and reports per entry in the policy's status and as metrics
// what was copied, how far behind the copy is, and what differs or failed.
//
// The entries' buckets are opened as the purge opens them (gardener.Buckets) and only read; the
// destination is opened as the snapshot function opens it (destination.Open). An
// object the copy holds with other content is reported and kept, never overwritten. An entry
// being deleted is not copied; its copy stays until the purge that ends the entry's deletion
// purges it with the entry's bucket (destination.CopiesOf says where the copies are).
package copy
