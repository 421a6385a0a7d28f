// Package swift is the object store provider for OpenStack Swift: spec.type "openstack", as
// upstream provider-openstack names it. A bucket is a Swift container, reached through
// Keystone (v3): the object-store endpoint of the bucket's region in the catalog.
//
// Credentials (the data of the BackupBucket's secret), as provider-openstack and
// etcd-backup-restore's Swift snapstore read them:
//
//	authURL                      Keystone's v3 URL
//	domainName                   the domain of the user and the project
//	tenantName                   the project
//	username, password           a user's password, or
//	applicationCredentialID, or applicationCredentialName with username,
//	  and applicationCredentialSecret: an application credential
//	caCert                       optional; PEM certificates to trust for Keystone and Swift
//	insecure                     optional; "true" skips TLS verification (as upstream)
//
// The BackupBucket's spec.region picks the catalog's region; entries' etcd-backup secrets carry
// it as region, as provider-openstack writes them.
//
// Nothing is sent when a store is opened: the first request authenticates, and a token that
// expires is renewed. Lists page through the container (1000 names a page). Deletes use the
// bulk middleware, several requests at once, and every per-name error in its answer is read.
//
// A bulk delete holds as many names as the proxy takes, at most 1000: the store reads the
// proxy's /info (its capabilities; no token is sent) at its first bulk delete and keeps
// bulk_delete's max_deletes_per_request and max_failed_deletes (a bulk delete stops at that
// many failures, leaving the names after them unanswered; a batch no larger never is). A proxy
// whose /info lists no bulk_delete offers none: one delete request per object, as for a proxy
// that answers a bulk delete with 404, 405, 501 or an account update's 204. A proxy whose
// /info cannot be read (hidden by expose_info = false, unreachable, not Swift's) gets 1000 a
// request, the limit Swift's default of 10,000 allows; should it take fewer, it refuses the
// request with its maximum (413 "Maximum Bulk Deletes: N per request"), and the store sends
// those names again N at a time and keeps N. Names a bulk delete stopped before answering for
// are reported failed, not deleted.
//
// Swift deletes only empty containers: Delete empties the container first.
//
// A store copies server-side (objectstore.ServerSideCopier) from a container of the same
// account with X-Copy-From; a large-object manifest arrives as one object of its content, up
// to the proxy's max_file_size (a larger one streams).
package swift
