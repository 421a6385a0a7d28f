package objectstore

// EtcdbrStore is how etcd-backup-restore (etcdbrctl, etcd's backup-restore sidecar) reads a
// provider's bucket, as etcd-druid configures it from a shoot's etcd-backup secret: the secret's
// data as files in a directory an environment variable names.
type EtcdbrStore struct {
	// Provider is etcdbrctl's --storage-provider: ABS, S3, GCS, Swift or Local (etcd-druid's
	// StorageProviderFromInfraProvider).
	Provider string
	// EndpointOverride is --store-endpoint-override, "" for the provider's own.
	EndpointOverride string
	// CredentialsEnv names the variable that points at the credentials; it names
	// CredentialsFile in the directory of files if that is set, else the directory.
	CredentialsEnv, CredentialsFile string
	// Home is $HOME for Local, the directory holding the bucket directory; "" otherwise.
	Home string
}

// EtcdbrProvider is a Provider that says how etcd-backup-restore reads its buckets.
type EtcdbrProvider interface {
	// EtcdbrStore is the configuration of etcdbrctl for the bucket w names, read with
	// credentials (the entry's secret data).
	EtcdbrStore(w Where, credentials map[string][]byte) (EtcdbrStore, error)
}
