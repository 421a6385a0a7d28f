// Package s3 is the object store provider for Amazon S3 and any S3-compatible endpoint
// (MinIO, Ceph RGW, versitygw, …): spec.type "aws", as upstream provider-aws names it. A
// bucket is an S3 bucket; the same code serves AWS and other endpoints.
//
// Credentials (the data of the BackupBucket's secret), as provider-aws and
// etcd-backup-restore's S3 snapstore read them:
//
//	accessKeyID       required
//	secretAccessKey   required
//	region            the bucket's region; the BackupBucket's (BackupEntry's) spec.region
//	                  takes precedence (objectstore.InRegion), as upstream has it. One of
//	                  the two is required.
//	endpoint          optional; the URL of an S3-compatible service, e.g.
//	                  http://127.0.0.1:7070 (without it, AWS's endpoint for the region)
//	s3ForcePathStyle  optional; "true" addresses buckets as <endpoint>/<bucket> instead
//	                  of <bucket>.<host> — what most S3-compatible services need
//
// Values are trimmed of surrounding white space. The generated secret holds the same keys
// with the trimmed values (and the effective region), since etcd-backup-restore reads its
// files as they are.
//
// Lists use ListObjectsV2, pages of up to 1000 keys. Deletes use DeleteObjects, at most 1000
// keys a request, several requests at once, and every per-key error in the answer is checked.
//
// Versioned buckets (versioning Enabled or Suspended, read once per store with
// GetBucketVersioning): List walks ListObjectVersions, so a key is listed while any version or
// delete marker of it is left, and DeleteKeys deletes every version and delete marker of its
// keys — a purge leaves nothing behind. A version that object lock protects (retention not
// yet ended, legal hold) fails its key with objectstore.ErrObjectLocked; governance-mode
// retention is never bypassed.
//
// S3 deletes only empty buckets: Delete empties the bucket first.
//
// A store copies server-side (objectstore.ServerSideCopier) from a bucket at the same endpoint
// with CopyObject, up to MaxCopySize (5 GiB; a larger object streams), without the source's
// tags; its credentials must read the source bucket, or the copy streams.
package s3
