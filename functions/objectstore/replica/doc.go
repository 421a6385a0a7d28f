// Package replica copies every object under a prefix from one object store to another under
// the same keys, verified object by object: the core of a second copy of every backup. It sits
// below the functions, beside the providers: the copy function (functions/copy) runs it per
// entry on a BackupCopyPolicy's schedule.
//
// # What Copy does with each key
//
// [Copy] lists the source under the prefix and, a few objects at once ([WithConcurrency]),
// reads each one's properties at both ends ([objectstore.Store.Stat]):
//
//   - missing at the destination: copied server-side where the destination can (below),
//     otherwise streamed from the source into the destination ([objectstore.Store.Open] into
//     [objectstore.Store.Upload]; nothing is held whole in memory), hashed while it streams;
//     then verified (below) and counted as copied;
//   - at the destination with the same size and checksum: skipped;
//   - at the destination with another size or checksum: never overwritten. It is reported in
//     [Report.Differing] with both sizes and checksums, logged at warn, and Copy's error wraps
//     [ErrDiffers]. Which side is right is for a person to decide (a byte flipped in the copy,
//     or a source rewritten under the same name, which etcd-backup-restore never does);
//   - gone from the source since the listing (etcd-backup-restore's garbage collection):
//     counted as vanished, nothing written.
//
// Copy never writes to or deletes from the source, and never replaces or deletes an object at
// the destination it did not write itself in the same run. The one deletion it makes: an
// object it has just written (the key held none) that fails verification, or cannot be read
// back to verify it, is removed again, so that no unverified copy is left to be taken for a
// good one; a failed verification wraps [ErrVerifyFailed]. Under S3 versioning, that removal
// removes the key's every version, as [objectstore.Store.DeleteKeys] does; under object lock it
// fails, and the failure says so.
//
// A key that fails (a refused write, a broken read that could not resume) is in
// [Report.Failed] with an error naming the key and wrapping the store's sentinel
// ([objectstore.ErrBucketNotFound], [objectstore.ErrObjectChanged], ...); the destination
// holds for it what it held before, and Copy's error wraps [ErrIncomplete]. A failure that
// concerns every key alike — a missing bucket, credentials rejected or not allowed
// ([objectstore.ErrUnauthenticated], [objectstore.ErrUnauthorized]: one policy holds for an
// entry's prefix), the context ending, a failed listing of the source — stops the copy; the
// objects not yet tried are left for the next run. Copy is idempotent: run again, it copies
// what is missing and skips the rest.
//
// # Server-side copies
//
// A destination that is an [objectstore.ServerSideCopier] copies the object from the source
// itself, the content never passing through Copy, when both ends are buckets of one provider
// it can copy between (S3 CopyObject at one endpoint, up to 5 GiB; GCS rewrite at one
// endpoint; Azure Copy Blob from a read-only SAS of the source blob, in one storage account or
// across accounts; Swift's X-Copy-From in one account; never local). It never replaces an object, copies no deletion mark of the
// source's, and the destination's own immutability settings apply to the copy as to an
// upload. When the destination declines for the pair of stores
// ([objectstore.ErrNotServerSide]: another provider, endpoint or account, the server refusing
// with access denied), Copy logs it once and streams every object of that Copy; until one
// server-side copy has gone through, the objects are tried one at a time, so a refusal costs
// one request. An object the destination declines alone ([objectstore.ErrObjectNotServerSide]:
// too large for one request, or marked with a GCS custom time a copy would carry over) streams
// alone. [Report.ServerSide] counts the objects copied server-side.
//
// A server-side copy is verified as a streamed one, by size and a checksum both ends agree on:
// both stores' MD5 when both report one (an S3 object of one PutObject, a GCS object written
// whole, an Azure blob with Content-MD5, which Copy Blob carries over); otherwise the source
// is read (and checked against its own MD5 if it has one) and the copy verified against what
// was read, by its MD5 (S3 gives the copy of a multipart upload an MD5 ETag) or by reading it
// back.
//
// # Which checksum verifies what
//
// A checksum "both ends agree on" is the stores' own MD5 of the whole object when both ends
// report one ([objectstore.ObjectInfo.MD5]); otherwise SHA-256 of the content:
//
//   - comparing an object already at the destination: both MD5s if both stores report one;
//     otherwise both objects are read and their SHA-256 compared;
//   - verifying a written object: its size, and the destination's MD5 against the MD5 of the
//     bytes read from the source when the destination reports one; otherwise the destination's
//     object is read back and its SHA-256 compared with the SHA-256 computed while the source
//     streamed. When the source reports an MD5, the bytes read are checked against it too, so
//     a read that went wrong is not copied.
//
// Who reports an MD5 (checked against the content by storetest's StatMD5 for every
// provider):
//
//	provider  MD5 reported for                              not for
//	s3        objects written in one PutObject (Upload's     multipart uploads (Upload above 8 MiB,
//	          body below objectstore.UploadPartSize), no     every etcd-backup-restore snapshot),
//	          SSE-KMS/SSE-C                                  SSE-KMS, SSE-C
//	gcs       every object written whole (md5Hash)           composite objects (etcd-backup-
//	                                                         restore's composed snapshots)
//	swift     every ordinary object (ETag)                   large-object manifests (etcd-backup-
//	                                                         restore's snapshots; their segments do)
//	azure     blobs written in one Put Blob (Upload's body   blobs committed from blocks (Upload
//	          below one block): Content-MD5 the store        above 8 MiB, etcd-backup-restore),
//	          computed; or a Content-MD5 a block list's      unless their writer set one
//	          writer asserted
//	local     never                                          every file
//
// So per provider pair, source → destination (comparing needs an MD5 at both ends, verifying a
// write one at the destination):
//
//	local → any, any → local   SHA-256 to compare (local reports no MD5); a written object is
//	                           verified by the destination's MD5 where it reports one
//	azure, s3 → any            MD5 for objects up to 8 MiB written in one request (Upload's
//	                           own, PutBytes); SHA-256 for larger ones and for every
//	                           etcd-backup-restore snapshot (blocks, multipart)
//	gcs, swift → any           MD5 for objects written whole (swift segments, gcs objects);
//	                           SHA-256 for composites and manifests
//	any → azure, s3            a written object up to 8 MiB is verified by the destination's
//	                           MD5, a larger one read back (blocks, multipart: no MD5)
//	any → gcs, swift           a written object is verified by the destination's MD5 (one
//	                           resumable upload, one PUT: up to Swift's 5 GiB)
//
// Measured on the emulators (replica's tests, Report.VerifiedByMD5/BySHA256): local → S3 and
// Azurite → S3 verify 8 of 9 objects by MD5, the one above 8 MiB by SHA-256; S3 → GCS and
// local → Swift all 9 by MD5.
//
// Each store's other hashes — Azure's CRC64, GCS's CRC32C, S3's x-amz-checksum-sha256 — have
// no counterpart at another provider (S3's SHA-256 of a multipart upload is a digest of the
// parts' digests), so they would serve only copies within one provider; Copy does not use them.
//
// Verifying by SHA-256 costs a second read: of the destination after each write, and of both
// ends for each object already there when the stores report no common MD5 — for
// etcd-backup-restore's snapshots, every one, on every run: no ledger of verified copies (nor
// the SHA-256 as the destination object's metadata) spares the rereads.
//
// # What it is not
//
// etcd-backup-restore's copier (pkg/snapshot/copier, `etcdbrctl copy`) copies snapshot names
// missing at the destination, skipping any name that exists without a size or checksum check,
// does not verify what it wrote, reports failures only as one joined error, and never deletes.
// Copy compares and verifies every object, reports per key, and removes only the copies it
// wrote and found wrong; it copies every object under the prefix, chunks and other objects
// included, not only what etcd-backup-restore's List calls a snapshot. A Swift large-object
// manifest is read as its content: it lands at the destination as a whole object, beside its
// segments. A local destination cannot hold a key and keys under it ("<snapshot>" and
// "<snapshot>/<chunk>", as etcd-backup-restore's Swift and GCS stores leave them): such a key
// fails with objectstore.ErrInvalidKey, reported like any other failure.
//
// The destination's credentials must allow reading (to compare and verify) besides writing;
// deleting only to remove a copy that failed verification. The source's need only reading.
//
// Copy assumes it is the only writer under the prefix at the destination: two copies of one
// prefix at once could each find a key missing and write it (the same content, both verified).
// Streaming writes unconditionally, and so does S3's server-side copy (its CopyFrom checks the
// key first); the copy function runs one copy per entry.
package replica
