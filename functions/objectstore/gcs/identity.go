package gcs

import (
	"encoding/json"
	"fmt"
)

// Where etcd-druid mounts the etcd-backup secret's token for etcd-backup-restore: the
// credentials file of a workload identity names it (provider-gcp's paths; a source- entry's
// secret is mounted apart, provider-gcp#1209).
const (
	TokenDir       = "/var/.gcp"
	SourceTokenDir = "/var/.source-gcp"
)

// EtcdBackupData is what a workload identity adds to an entry's etcd-backup secret, as
// provider-gcp writes it: projectID, credentialsConfig (the external_account configuration
// reading the token from tokenDir/token) and the same configuration as serviceaccount.json,
// the file etcd-druid points GOOGLE_APPLICATION_CREDENTIALS at.
func EtcdBackupData(config []byte, tokenDir string) (map[string][]byte, error) {
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
