package gcs

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Credential keys in the BackupBucket's secret and in the secrets housekeeper writes.
const (
	KeyServiceAccountJSON = "serviceaccount.json"
	KeyProjectID          = "projectID"
	// KeyCredentialsConfig is the external_account configuration of a workload identity, as
	// provider-gcp puts it into etcd-backup next to serviceaccount.json.
	KeyCredentialsConfig = "credentialsConfig"
	KeyConfig            = "config"
	KeyToken             = "token"

	WorkloadIdentityConfigKind = "WorkloadIdentityConfig"

	typeServiceAccount  = "service_account"
	typeExternalAccount = "external_account"
	subjectTokenTypeJWT = "urn:ietf:params:oauth:token-type:jwt"
)

// projectIDPattern is the form etcd-backup-restore requires of a project ID (and GCS of one).
var projectIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)

// serviceAccountFields are the fields etcd-backup-restore accepts in serviceaccount.json: it
// refuses a key with any other, so housekeeper refuses it at the BackupBucket, not at the
// first backup.
var serviceAccountFields = []string{
	"type", "project_id", "client_email", "universe_domain", "auth_uri", "auth_provider_x509_cert_url",
	"client_x509_cert_url", "client_id", "private_key_id", "private_key", "token_uri",
}

// credentials are the parsed credentials: a service account key, or a workload identity.
type credentials struct {
	projectID      string
	serviceAccount []byte            // the key as given, static credentials only
	identity       *workloadIdentity // workload identity only
}

// workloadIdentity is an external_account configuration with the token to exchange.
type workloadIdentity struct {
	config externalAccount
	token  string
}

// externalAccount is the part of an external_account configuration that is used: what
// provider-gcp keeps of it.
type externalAccount struct {
	Type                           string `json:"type"`
	Audience                       string `json:"audience"`
	SubjectTokenType               string `json:"subject_token_type"`
	TokenURL                       string `json:"token_url"`
	ServiceAccountImpersonationURL string `json:"service_account_impersonation_url,omitempty"`
	UniverseDomain                 string `json:"universe_domain,omitempty"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("gcs: %w: "+format, append([]any{objectstore.ErrInvalidCredentials}, args...)...)
}

func parseCredentials(data map[string][]byte) (credentials, error) {
	if _, static := data[KeyServiceAccountJSON]; !static && len(data[KeyConfig]) > 0 {
		return parseWorkloadIdentity(data)
	}
	raw, ok := data[KeyServiceAccountJSON]
	if !ok {
		return credentials{}, fmt.Errorf("gcs: %w: secret has no %q (a service account key) and no %q (a workload identity)",
			objectstore.ErrMissingCredentials, KeyServiceAccountJSON, KeyConfig)
	}
	var key map[string]any
	if err := json.Unmarshal(raw, &key); err != nil {
		return credentials{}, invalid("%q is not a JSON object", KeyServiceAccountJSON)
	}
	str := func(field string) string { s, _ := key[field].(string); return s }
	switch t := str("type"); t {
	case typeServiceAccount:
	case typeExternalAccount:
		return credentials{}, invalid("%q is an external_account configuration: give a workload identity as a WorkloadIdentity's secret (%q and %q)", KeyServiceAccountJSON, KeyConfig, KeyToken)
	default:
		return credentials{}, invalid("%q has type %q, want %q", KeyServiceAccountJSON, t, typeServiceAccount)
	}
	for field := range key {
		if !slices.Contains(serviceAccountFields, field) {
			return credentials{}, invalid("%q has the field %q, which etcd-backup-restore refuses (it accepts %s)", KeyServiceAccountJSON, field, strings.Join(serviceAccountFields, ", "))
		}
	}
	for _, field := range []string{"client_email", "private_key"} {
		if strings.TrimSpace(str(field)) == "" {
			return credentials{}, fmt.Errorf("gcs: %w: %q has no %q", objectstore.ErrMissingCredentials, KeyServiceAccountJSON, field)
		}
	}
	c := credentials{projectID: str("project_id"), serviceAccount: raw}
	if !projectIDPattern.MatchString(c.projectID) {
		return credentials{}, invalid("%q: project_id %q is not a project ID (6 to 30 lower-case letters, digits and hyphens, starting with a letter)", KeyServiceAccountJSON, c.projectID)
	}
	if p, ok := data[KeyProjectID]; ok && strings.TrimSpace(string(p)) != c.projectID {
		return credentials{}, invalid("%q is %q, but %q's project_id is %q", KeyProjectID, strings.TrimSpace(string(p)), KeyServiceAccountJSON, c.projectID)
	}
	return c, nil
}

// workloadIdentityConfig is provider-gcp's WorkloadIdentityConfig, the WorkloadIdentity's
// spec.targetSystem.providerConfig that gardenlet copies into the secret's config.
type workloadIdentityConfig struct {
	APIVersion        string          `json:"apiVersion"`
	Kind              string          `json:"kind"`
	ProjectID         string          `json:"projectID"`
	CredentialsConfig json.RawMessage `json:"credentialsConfig"`
}

// ParseWorkloadIdentityConfig reads a gcp workload identity's config (YAML or JSON): its
// project and its external_account configuration.
func ParseWorkloadIdentityConfig(config []byte) (projectID string, account externalAccount, err error) {
	var c workloadIdentityConfig
	if err := yaml.Unmarshal(config, &c); err != nil {
		return "", account, invalid("%q is not a WorkloadIdentityConfig: %v", KeyConfig, err)
	}
	if c.Kind != WorkloadIdentityConfigKind {
		return "", account, invalid("%q has kind %q, want %s", KeyConfig, c.Kind, WorkloadIdentityConfigKind)
	}
	if !projectIDPattern.MatchString(c.ProjectID) {
		return "", account, invalid("%q: projectID %q is not a project ID", KeyConfig, c.ProjectID)
	}
	if len(c.CredentialsConfig) == 0 {
		return "", account, fmt.Errorf("gcs: %w: %q has no credentialsConfig", objectstore.ErrMissingCredentials, KeyConfig)
	}
	if err := json.Unmarshal(c.CredentialsConfig, &account); err != nil {
		return "", account, invalid("%q: credentialsConfig is not an object: %v", KeyConfig, err)
	}
	switch {
	case account.Type != typeExternalAccount:
		return "", account, invalid("%q: credentialsConfig has type %q, want %q", KeyConfig, account.Type, typeExternalAccount)
	case account.Audience == "":
		return "", account, invalid("%q: credentialsConfig has no audience", KeyConfig)
	case account.SubjectTokenType != subjectTokenTypeJWT:
		return "", account, invalid("%q: credentialsConfig's subject_token_type is %q, want %q", KeyConfig, account.SubjectTokenType, subjectTokenTypeJWT)
	case !httpsURL(account.TokenURL):
		return "", account, invalid("%q: credentialsConfig's token_url must be an https URL", KeyConfig)
	case account.ServiceAccountImpersonationURL != "" && !httpsURL(account.ServiceAccountImpersonationURL):
		return "", account, invalid("%q: credentialsConfig's service_account_impersonation_url must be an https URL", KeyConfig)
	}
	return c.ProjectID, account, nil
}

func parseWorkloadIdentity(data map[string][]byte) (credentials, error) {
	projectID, account, err := ParseWorkloadIdentityConfig(data[KeyConfig])
	if err != nil {
		return credentials{}, err
	}
	token := strings.TrimSpace(string(data[KeyToken]))
	if token == "" {
		return credentials{}, fmt.Errorf("gcs: %w: the workload identity's secret has no %q yet (gardenlet's token requestor writes it)", objectstore.ErrNotReady, KeyToken)
	}
	return credentials{projectID: projectID, identity: &workloadIdentity{config: account, token: token}}, nil
}

func httpsURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil
}
