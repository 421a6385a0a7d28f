// Package azure is the object store provider for Azure Blob Storage (spec.type "azure"): a
// bucket is a blob container in the storage account named by the credentials.
//
// Credentials (the data of the BackupBucket's secret):
//
//	storageAccount  required; the account name
//	storageKey      required; a shared key of the account (base64)
//	domain          optional; the blob service domain, default blob.core.windows.net. The
//	                service URL is https://<storageAccount>.<domain>, as upstream
//	                provider-azure and etcd-backup-restore build it — so the domain includes
//	                the "blob." label (blob.core.chinacloudapi.cn, blob.core.usgovcloudapi.net).
//	endpoint        optional; a full service URL that takes precedence over domain, e.g.
//	                Azurite's path-style http://127.0.0.1:10000/devstoreaccount1.
//
// Values are trimmed of surrounding white space (secrets made from files often end in a
// newline). Deleting keys uses Blob Batch: at most 256 deletes per request, several requests
// at once, and every sub-response is checked, because a batch is not atomic.
//
// A store copies server-side (objectstore.ServerSideCopier) with Copy Blob from any container
// the service can read, in this storage account or another: the source is named by a
// read-only SAS of its one blob, signed with the source's key. A pending copy is polled; one
// that fails is removed.
package azure
