// Package objectstore puts the object stores housekeeper cleans up behind one small interface.
//
// A [Provider] opens a [Store] — one bucket: an Azure container, a directory on a local disk —
// with the credentials of a Kubernetes secret, and names the keys etcd-backup-restore reads
// from the secret housekeeper generates for it. A [Registry] picks the provider by the
// BackupBucket's spec.type. The bucket, entry and purge functions use nothing else. A store
// writes one way, streaming ([Store.Upload]); [PutBytes] writes bytes already in memory
// through it, for tests and make faults. It reads the same way ([Store.Open]). A store that
// can copy an object from another bucket of its provider without the bytes passing through
// housekeeper is a [ServerSideCopier] (the copy function's replica uses it).
//
// Providers live in subpackages (azure, s3, gcs, swift, local; package providers links them
// all) and share the rules here: bucket names are
// checked by [ValidateBucketName] before any request, keys by [ValidateKey], and every error
// a caller must act on wraps one of the sentinel errors in errors.go, with a message that
// names the problem and never a credential. Package storetest holds the conformance test
// every provider passes.
package objectstore
