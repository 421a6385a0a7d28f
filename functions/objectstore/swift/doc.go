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
// bulk middleware, 1000 names a request, several at once, and every per-name error in its
// answer is read; a proxy without bulk delete gets one request per object. Swift deletes only
// empty containers: Delete empties the container first.
package swift
