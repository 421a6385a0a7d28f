// Package gcs is the object store provider for Google Cloud Storage: spec.type "gcp", as
// upstream provider-gcp names it. A bucket is a GCS bucket.
//
// Credentials (the data of the BackupBucket's secret), as provider-gcp and
// etcd-backup-restore's GCS snapstore read them:
//
//	serviceaccount.json  a service account key (type service_account) with project_id,
//	                     client_email and private_key, and no field etcd-backup-restore
//	                     refuses
//	projectID            optional; must equal the key's project_id when set
//
// or a WorkloadIdentity's secret, as gardenlet writes it:
//
//	config   provider-gcp's WorkloadIdentityConfig: projectID and credentialsConfig, an
//	         external_account credentials configuration
//	token    the WorkloadIdentity's token (gardenlet's token requestor writes it; until then
//	         the bucket waits with objectstore.ErrNotReady), exchanged at the configuration's
//	         token_url
//
// The BackupBucket's spec.region is the bucket's location, and its providerConfig is
// provider-gcp's BackupBucketConfig: store.endpointOverride replaces the JSON API's endpoint
// (a regional endpoint, or an emulator). Over plain http nothing is authenticated, as
// etcd-backup-restore does for an http endpoint (GCS itself only answers https).
//
// Buckets are created as upstream creates them: uniform bucket-level access, soft delete
// off, and the lifecycle rule that deletes objects a day after their custom time. Lists page
// through objects.list (1000 names a page, names only). Deletes go through the JSON API's
// batch endpoint, 100 deletes a request, several requests at once, and every answer is read;
// a server without it gets one delete request per object, as many at once. GCS deletes only
// empty buckets: Delete empties the bucket first.
//
// A store copies server-side (objectstore.ServerSideCopier) from a bucket at the same endpoint
// with objects.rewrite, repeated with its token until done; its credentials must read the
// source bucket, or the copy streams. An object with a custom time (provider-gcp's mark for
// deletion, which a rewrite may carry over) streams.
package gcs
