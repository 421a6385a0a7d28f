package gcs_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

func keyWith(t *testing.T, change func(map[string]any)) []byte {
	t.Helper()
	raw, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	var key map[string]any
	if err := json.Unmarshal(raw, &key); err != nil {
		t.Fatal(err)
	}
	change(key)
	out, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const identityConfig = `apiVersion: gcp.provider.extensions.gardener.cloud/v1alpha1
kind: WorkloadIdentityConfig
projectID: my-project-1
credentialsConfig:
  type: external_account
  audience: //iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/gardener
  subject_token_type: urn:ietf:params:oauth:token-type:jwt
  token_url: https://sts.googleapis.com/v1/token
  service_account_impersonation_url: https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/sa@my-project-1.iam.gserviceaccount.com:generateAccessToken
  credential_source:
    file: /somewhere/else
`

func TestCredentials(t *testing.T) {
	good := keyWith(t, func(map[string]any) {})
	for _, tc := range []struct {
		name  string
		creds map[string][]byte
		want  error
		says  string
	}{
		{"ServiceAccount", map[string][]byte{gcs.KeyServiceAccountJSON: good}, nil, ""},
		{"SameProjectID", map[string][]byte{gcs.KeyServiceAccountJSON: good, gcs.KeyProjectID: []byte(stack.GCSProject)}, nil, ""},
		{"Nothing", map[string][]byte{}, objectstore.ErrMissingCredentials, `no "serviceaccount.json"`},
		{"NotJSON", map[string][]byte{gcs.KeyServiceAccountJSON: []byte("{")}, objectstore.ErrInvalidCredentials, "not a JSON object"},
		{"UserType", map[string][]byte{gcs.KeyServiceAccountJSON: keyWith(t, func(k map[string]any) { k["type"] = "authorized_user" })}, objectstore.ErrInvalidCredentials, `type "authorized_user"`},
		{"ExternalAccountAsKey", map[string][]byte{gcs.KeyServiceAccountJSON: keyWith(t, func(k map[string]any) { k["type"] = "external_account" })}, objectstore.ErrInvalidCredentials, "WorkloadIdentity"},
		{"FieldEtcdbrRefuses", map[string][]byte{gcs.KeyServiceAccountJSON: keyWith(t, func(k map[string]any) { k["quota_project_id"] = "x" })}, objectstore.ErrInvalidCredentials, `"quota_project_id"`},
		{"NoPrivateKey", map[string][]byte{gcs.KeyServiceAccountJSON: keyWith(t, func(k map[string]any) { delete(k, "private_key") })}, objectstore.ErrMissingCredentials, `"private_key"`},
		{"BadProject", map[string][]byte{gcs.KeyServiceAccountJSON: keyWith(t, func(k map[string]any) { k["project_id"] = "Bad_Project" })}, objectstore.ErrInvalidCredentials, "not a project ID"},
		{"OtherProjectID", map[string][]byte{gcs.KeyServiceAccountJSON: good, gcs.KeyProjectID: []byte("other-project")}, objectstore.ErrInvalidCredentials, "project_id"},
		{"WorkloadIdentity", map[string][]byte{gcs.KeyConfig: []byte(identityConfig), gcs.KeyToken: []byte("t")}, nil, ""},
		{"WorkloadIdentityWithoutToken", map[string][]byte{gcs.KeyConfig: []byte(identityConfig)}, objectstore.ErrNotReady, "token requestor"},
		{"WorkloadIdentityOtherKind", map[string][]byte{gcs.KeyConfig: []byte(strings.Replace(identityConfig, "kind: WorkloadIdentityConfig", "kind: Other", 1)), gcs.KeyToken: []byte("t")}, objectstore.ErrInvalidCredentials, `kind "Other"`},
		{"WorkloadIdentityHTTPTokenURL", map[string][]byte{gcs.KeyConfig: []byte(strings.Replace(identityConfig, "https://sts", "http://sts", 1)), gcs.KeyToken: []byte("t")}, objectstore.ErrInvalidCredentials, "token_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gcs.New().Open("some-bucket", tc.creds)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Open: %v, want %v saying %q", err, tc.want, tc.says)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         error
		says         string
	}{
		{"None", "", nil, ""},
		{"Endpoint", `{"apiVersion":"gcp.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","store":{"endpointOverride":"https://storage.europe-west3.rep.googleapis.com"}}`, nil, ""},
		{"OtherKind", `{"kind":"BucketConfig"}`, objectstore.ErrInvalidConfig, `kind "BucketConfig"`},
		{"UnknownField", `{"kind":"BackupBucketConfig","stor":{}}`, objectstore.ErrInvalidConfig, "stor"},
		{"Immutability", "kind: BackupBucketConfig\nimmutability:\n  retentionType: bucket\n  retentionPeriod: 24h\n", objectstore.ErrInvalidConfig, "immutability"},
		{"EndpointNotURL", `{"kind":"BackupBucketConfig","store":{"endpointOverride":"storage.example.com"}}`, objectstore.ErrInvalidConfig, "endpointOverride"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gcs.New().Configure([]byte(tc.config))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Configure: %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
}

// A workload identity's etcd-backup carries what provider-gcp writes: the configuration with
// the token file etcd-druid mounts, as credentialsConfig and as serviceaccount.json, and the
// project; fields provider-gcp drops (the given credential_source) are dropped.
func TestEntrySecretData(t *testing.T) {
	data, err := gcs.New().EntrySecretData(objectstore.Entry{WorkloadIdentity: []byte(identityConfig), Source: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(data[gcs.KeyProjectID]) != "my-project-1" || string(data[gcs.KeyServiceAccountJSON]) != string(data[gcs.KeyCredentialsConfig]) {
		t.Fatalf("data %q", data)
	}
	var file map[string]any
	if err := json.Unmarshal(data[gcs.KeyCredentialsConfig], &file); err != nil {
		t.Fatal(err)
	}
	source, _ := file["credential_source"].(map[string]any)
	if source["file"] != "/var/.source-gcp/token" || file["type"] != "external_account" || file["token_url"] != "https://sts.googleapis.com/v1/token" ||
		!strings.HasSuffix(file["service_account_impersonation_url"].(string), ":generateAccessToken") {
		t.Errorf("credentials file %s", data[gcs.KeyCredentialsConfig])
	}
}
