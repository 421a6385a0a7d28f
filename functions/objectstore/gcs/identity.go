package gcs

import (
	"encoding/json"
	"fmt"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Where etcd-druid mounts the etcd-backup secret's token for etcd-backup-restore: the
// credentials file of a workload identity names it (provider-gcp's paths; a source- entry's
// secret is mounted apart, provider-gcp#1209).
const (
	TokenDir       = "/var/.gcp"
	SourceTokenDir = "/var/.source-gcp"
)

// etcdBackupData is what a workload identity adds to an entry's etcd-backup secret, as
// provider-gcp writes it: projectID, credentialsConfig (the external_account configuration
// reading the token from tokenDir/token) and the same configuration as serviceaccount.json,
// the file etcd-druid points GOOGLE_APPLICATION_CREDENTIALS at.
func etcdBackupData(config []byte, tokenDir string) (map[string][]byte, error) {
	projectID, account, err := ParseWorkloadIdentityConfig(config)
	if err != nil {
		return nil, err
	}
	type format struct {
		Type string `json:"type"`
	}
	type source struct {
		File   string `json:"file"`
		Format format `json:"format"`
	}
	withSource := struct {
		externalAccount
		CredentialSource source `json:"credential_source"`
	}{account, source{File: tokenDir + "/token", Format: format{Type: "text"}}}
	file, err := json.Marshal(withSource)
	if err != nil {
		return nil, fmt.Errorf("gcs: writing the credentials configuration: %w", err)
	}
	return map[string][]byte{
		KeyProjectID:          []byte(projectID),
		KeyCredentialsConfig:  file,
		KeyServiceAccountJSON: file,
	}, nil
}

var _ objectstore.EntrySecret = (*Provider)(nil)

// EntrySecretData is what provider-gcp adds to an entry's etcd-backup for a workload identity:
// an external_account configuration reading the token where etcd-druid mounts it (a source-
// entry's apart). Static credentials are copied as they are.
func (p *Provider) EntrySecretData(e objectstore.Entry) (map[string][]byte, error) {
	if e.WorkloadIdentity == nil {
		return nil, nil
	}
	dir := TokenDir
	if e.Source {
		dir = SourceTokenDir
	}
	return etcdBackupData(e.WorkloadIdentity, dir)
}
