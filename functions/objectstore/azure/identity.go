package azure

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Keys of management credentials: a service principal (Gardener's documented seed backup
// secret), or a workload identity whose secret gardenlet's token requestor keeps a token in.
const (
	KeyTenantID       = "tenantID"
	KeyClientID       = "clientID"
	KeyClientSecret   = "clientSecret"
	KeySubscriptionID = "subscriptionID"
	// KeyConfig holds a WorkloadIdentityConfig (clientID, tenantID, subscriptionID).
	KeyConfig = "config"
	// KeyToken holds the workload identity's token, the client assertion.
	KeyToken = "token"
)

// WorkloadIdentityConfigKind is the kind of a workload identity's config.
const WorkloadIdentityConfigKind = "WorkloadIdentityConfig"

type credentialKind string

const (
	servicePrincipal credentialKind = "service principal"
	workloadIdentity credentialKind = "workload identity"
)

// management is a parsed set of management credentials. It never prints a secret: only the
// kind and the IDs appear in messages.
type management struct {
	kind                               credentialKind
	tenantID, clientID, subscriptionID string
	clientSecret, token                string
}

func (m management) String() string {
	return fmt.Sprintf("%s %s in tenant %s", m.kind, m.clientID, m.tenantID)
}

// managementKeys are the keys whose presence (without storage keys) marks management credentials.
var managementKeys = []string{KeyTenantID, KeyClientID, KeyClientSecret, KeySubscriptionID, KeyConfig}

// isManagement reports whether data holds management rather than storage credentials.
func isManagement(data map[string][]byte) bool {
	if _, ok := data[KeyStorageAccount]; ok {
		return false
	}
	for _, k := range managementKeys {
		if _, ok := data[k]; ok {
			return true
		}
	}
	return false
}

type workloadIdentityConfig struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	ClientID       string `json:"clientID"`
	TenantID       string `json:"tenantID"`
	SubscriptionID string `json:"subscriptionID"`
}

// parseManagement reads a service principal (tenantID, clientID, clientSecret,
// subscriptionID) or a workload identity (config and token).
func parseManagement(data map[string][]byte) (management, error) {
	value := func(key string) string { return strings.TrimSpace(string(data[key])) }
	if raw, ok := data[KeyConfig]; ok {
		m := management{kind: workloadIdentity}
		var c workloadIdentityConfig
		if err := yaml.Unmarshal(raw, &c); err != nil {
			return m, fmt.Errorf("azure: %w: %q is not a WorkloadIdentityConfig: %v", objectstore.ErrInvalidCredentials, KeyConfig, err)
		}
		if c.Kind != WorkloadIdentityConfigKind {
			return m, fmt.Errorf("azure: %w: %q has kind %q, want %s", objectstore.ErrInvalidCredentials, KeyConfig, c.Kind, WorkloadIdentityConfigKind)
		}
		for _, f := range []struct{ name, value string }{{"clientID", c.ClientID}, {"tenantID", c.TenantID}, {"subscriptionID", c.SubscriptionID}} {
			if strings.TrimSpace(f.value) == "" {
				return m, fmt.Errorf("azure: %w: %q has no %s", objectstore.ErrMissingCredentials, KeyConfig, f.name)
			}
		}
		m.clientID, m.tenantID, m.subscriptionID = strings.TrimSpace(c.ClientID), strings.TrimSpace(c.TenantID), strings.TrimSpace(c.SubscriptionID)
		if m.token = value(KeyToken); m.token == "" {
			return m, fmt.Errorf("azure: %w: the workload identity secret has no %q yet (gardenlet's token requestor writes it)", objectstore.ErrNotReady, KeyToken)
		}
		return m, nil
	}
	m := management{kind: servicePrincipal}
	for _, f := range []struct {
		key string
		to  *string
	}{{KeyTenantID, &m.tenantID}, {KeyClientID, &m.clientID}, {KeyClientSecret, &m.clientSecret}, {KeySubscriptionID, &m.subscriptionID}} {
		if _, ok := data[f.key]; !ok {
			return m, fmt.Errorf("azure: %w: the service principal secret has no %q", objectstore.ErrMissingCredentials, f.key)
		}
		if *f.to = value(f.key); *f.to == "" {
			return m, fmt.Errorf("azure: %w: the service principal secret's %q is empty", objectstore.ErrMissingCredentials, f.key)
		}
	}
	return m, nil
}

// tokenCredential authenticates m against Microsoft Entra ID in env: a client secret for a
// service principal, the token as client assertion for a workload identity. A custom cloud's
// authority is not one Microsoft's instance discovery knows (Azure Stack Hub, a private
// cloud): discovery is skipped for it.
func (m management) tokenCredential(env environment, custom bool, opts azcore.ClientOptions) (azcore.TokenCredential, error) {
	opts.Cloud = env.config
	switch m.kind {
	case workloadIdentity:
		token := m.token
		return azidentity.NewClientAssertionCredential(m.tenantID, m.clientID,
			func(context.Context) (string, error) { return token, nil },
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: custom})
	default:
		return azidentity.NewClientSecretCredential(m.tenantID, m.clientID, m.clientSecret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: custom})
	}
}
