package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

// etcd-backup-restore's --storage-provider values for housekeeper's provider types (etcd-druid's
// StorageProviderFromInfraProvider).
var storageProviders = map[string]string{azure.Type: "ABS", s3.Type: "S3", gcs.Type: "GCS", swift.Type: "Swift", local.Type: "Local"}

// BackupStore is where etcd-backup-restore keeps the snapshots of a shoot's etcd-main,
// configured from the shoot's etcd-backup secret as gardenlet and etcd-druid configure it.
type BackupStore struct {
	// Provider is --storage-provider: ABS, S3, GCS, Swift or Local.
	Provider string
	// Container is the secret's bucketName, which etcd-druid passes as STORAGE_CONTAINER.
	Container string
	// Prefix is --store-prefix, <entry>/etcd-main: snapshots land under <Prefix>/v2/.
	Prefix string
	// EndpointOverride is --store-endpoint-override (Azurite's endpoint), from the secret's
	// endpoint key; etcd-druid takes it from the Etcd resource. GCS's secret has none: the
	// caller sets it, as provider-gcp's seed webhook sets the Etcd's from the BackupBucket's
	// providerConfig.store.endpointOverride.
	EndpointOverride string
	// CredentialsDir holds the secret's data as files, as its volume mount does
	// (AZURE_APPLICATION_CREDENTIALS for ABS, AWS_APPLICATION_CREDENTIALS for S3,
	// GOOGLE_APPLICATION_CREDENTIALS naming its serviceaccount.json for GCS,
	// OPENSTACK_APPLICATION_CREDENTIALS for Swift).
	CredentialsDir string
	// Home is $HOME for Local: $HOME/<container> is the bucket directory, where etcd-druid
	// mounts <hostPath>/<container>; here HOME is the secret's hostPath itself.
	Home string
}

// BackupStore writes the data of an entry's etcd-backup secret as files into credentialsDir
// (readable by RunAs only) and returns the store etcd-backup-restore is configured with for
// providerType (the BackupEntry's spec.type): container is the secret's bucketName, prefix
// <entry>/etcd-main. (The caller derives both: this package is below the functions, whose
// tests start it.)
func (b *EtcdBR) BackupStore(providerType, container, prefix string, secretData map[string][]byte, credentialsDir string) (*BackupStore, error) {
	provider, ok := storageProviders[providerType]
	if !ok {
		return nil, fmt.Errorf("etcd-backup-restore: no storage provider for type %q", providerType)
	}
	if container == "" || prefix == "" {
		return nil, fmt.Errorf("etcd-backup-restore: store of %s needs a container (the secret's bucketName) and a prefix", prefix)
	}
	if err := b.ownedDir(credentialsDir); err != nil {
		return nil, err
	}
	for key, value := range secretData {
		file := filepath.Join(credentialsDir, key)
		if err := os.WriteFile(file, value, 0o600); err != nil {
			return nil, err
		}
		if b.RunAs != nil {
			if err := os.Chown(file, int(b.RunAs.Uid), int(b.RunAs.Gid)); err != nil {
				return nil, err
			}
		}
	}
	s := &BackupStore{
		Provider:       provider,
		Container:      container,
		Prefix:         prefix,
		CredentialsDir: credentialsDir,
	}
	switch providerType {
	case azure.Type:
		s.EndpointOverride = string(secretData[azure.KeyEndpoint])
	case s3.Type:
		s.EndpointOverride = string(secretData[s3.KeyEndpoint])
	case local.Type:
		s.Home = string(secretData[local.KeyHostPath])
		if s.Home == "" {
			return nil, fmt.Errorf("etcd-backup secret for %s has no %s", prefix, local.KeyHostPath)
		}
	}
	return s, nil
}

// SnapshotPrefix is the key prefix of the snapshots in the bucket: <entry>/etcd-main/v2/.
func (s *BackupStore) SnapshotPrefix() string { return s.Prefix + "/v2/" }

// Args are the store flags of etcdbrctl snapshot, server and restore.
func (s *BackupStore) Args() []string {
	args := []string{"--storage-provider=" + s.Provider, "--store-prefix=" + s.Prefix}
	if s.EndpointOverride != "" {
		args = append(args, "--store-endpoint-override="+s.EndpointOverride)
	}
	return args
}

// Env is the store environment of the etcd-backup-restore container.
func (s *BackupStore) Env() []string {
	env := []string{"STORAGE_CONTAINER=" + s.Container}
	switch s.Provider {
	case "ABS":
		env = append(env, "AZURE_APPLICATION_CREDENTIALS="+s.CredentialsDir)
	case "S3":
		// An etcd-druid pod has no AWS_* settings. An AWS_CA_BUNDLE inherited from this
		// machine would fail etcd-backup-restore's config loading (it brings its own
		// http.Client, which the SDK cannot give a CA bundle); empty means unset.
		env = append(env, "AWS_APPLICATION_CREDENTIALS="+s.CredentialsDir, "AWS_CA_BUNDLE=")
	case "Swift":
		env = append(env, "OPENSTACK_APPLICATION_CREDENTIALS="+s.CredentialsDir)
	case "GCS":
		env = append(env, "GOOGLE_APPLICATION_CREDENTIALS="+filepath.Join(s.CredentialsDir, gcs.KeyServiceAccountJSON))
	case "Local":
		env = append(env, "HOME="+s.Home)
	}
	return env
}

// SourceArgs are the store flags of the source of etcdbrctl copy (--source-…).
func (s *BackupStore) SourceArgs() []string {
	var args []string
	for _, a := range s.Args() {
		args = append(args, "--source-"+strings.TrimPrefix(a, "--"))
	}
	return args
}

// SourceEnv is the store environment of the source of etcdbrctl copy: Env with SOURCE_ before
// each name, but for a Local store's HOME, which etcd-backup-restore reads unprefixed.
func (s *BackupStore) SourceEnv() []string {
	var env []string
	for _, e := range s.Env() {
		if !strings.HasPrefix(e, "HOME=") {
			e = "SOURCE_" + e
		}
		env = append(env, e)
	}
	return env
}

// Snapshot is what the name of an object etcd-backup-restore saved says about it:
// <prefix>/v2/{Full,Incr}-<first revision>-<last revision>-<unix time>[.gz][.final].
type Snapshot struct {
	// Kind is "Full" or "Incr" (a delta snapshot).
	Kind                        string
	FirstRevision, LastRevision int64
}

// ParseSnapshot reads a snapshot's object key; ok is false for any other object.
func ParseSnapshot(key string) (s Snapshot, ok bool) {
	parts := strings.Split(key[strings.LastIndex(key, "/")+1:], "-")
	if len(parts) != 4 || (parts[0] != "Full" && parts[0] != "Incr") {
		return Snapshot{}, false
	}
	first, err1 := strconv.ParseInt(parts[1], 10, 64)
	last, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Snapshot{}, false
	}
	return Snapshot{Kind: parts[0], FirstRevision: first, LastRevision: last}, true
}
