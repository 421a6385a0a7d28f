package azure

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Type is the BackupBucket spec.type this provider serves.
const Type = "azure"

// Credential keys in the BackupBucket's secret and in the generated secret.
const (
	KeyStorageAccount = "storageAccount"
	KeyStorageKey     = "storageKey"
	KeyDomain         = "domain"
	KeyEndpoint       = "endpoint"
)

// DefaultDomain is the public cloud's blob service domain.
const DefaultDomain = "blob.core.windows.net"

// Provider opens Azure blob containers.
type Provider struct{ opts options }

var _ objectstore.Provider = (*Provider)(nil)

// New returns the Azure provider.
func New(opts ...Option) *Provider {
	o := options{
		batchConcurrency: DefaultBatchConcurrency,
		batchSize:        MaxBatchSize,
		listPageSize:     objectstore.MaxPageSize,
		pollFrequency:    5 * time.Second,
		now:              time.Now,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return &Provider{opts: o}
}

// Type returns "azure".
func (p *Provider) Type() string { return Type }

// Open returns the store for the container named bucket. It checks the name and the
// credentials and sends no request.
func (p *Provider) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	if err := objectstore.ValidateBucketName(bucket); err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	creds, err := parseCredentials(credentials)
	if err != nil {
		return nil, err
	}
	cred, err := container.NewSharedKeyCredential(creds.account, creds.key)
	if err != nil {
		// Not expected after parseCredentials; the SDK's message is left out all the same.
		return nil, fmt.Errorf("azure: %w: %q is not a usable shared key", objectstore.ErrInvalidCredentials, KeyStorageKey)
	}
	var clientOpts container.ClientOptions
	if p.opts.httpClient != nil {
		clientOpts.ClientOptions = azcore.ClientOptions{Transport: p.opts.httpClient}
	}
	client, err := container.NewClientWithSharedKeyCredential(creds.serviceURL+"/"+bucket, cred, &clientOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: container %q: creating client: %w", bucket, err)
	}
	return &store{name: bucket, client: client, opts: p.opts}, nil
}

// BackupSecretData returns storageAccount and storageKey, and domain and endpoint when the
// credentials hold them. etcd-backup-restore (≥ v0.41) reads only storageAccount, storageKey
// and the optional domain; endpoint is for housekeeper itself (a source- entry's purge opens
// the store with this data), and reaches etcd-backup-restore only as its
// --store-endpoint-override flag, which etcd-druid sets from the Etcd resource.
func (p *Provider) BackupSecretData(credentials map[string][]byte) (map[string][]byte, error) {
	creds, err := parseCredentials(credentials)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		KeyStorageAccount: []byte(creds.account),
		KeyStorageKey:     []byte(creds.key),
	}
	if creds.domain != "" {
		data[KeyDomain] = []byte(creds.domain)
	}
	if creds.endpoint != "" {
		data[KeyEndpoint] = []byte(creds.endpoint)
	}
	return data, nil
}

type credentials struct {
	account, key     string
	domain, endpoint string // as given (trimmed); empty when absent
	serviceURL       string // without a trailing slash
}

func parseCredentials(data map[string][]byte) (credentials, error) {
	var c credentials
	required := func(key string) (string, error) {
		v, ok := data[key]
		if !ok {
			return "", fmt.Errorf("azure: %w: secret has no %q", objectstore.ErrMissingCredentials, key)
		}
		s := strings.TrimSpace(string(v))
		if s == "" {
			return "", fmt.Errorf("azure: %w: %q is empty", objectstore.ErrMissingCredentials, key)
		}
		return s, nil
	}
	if isManagement(data) {
		return c, fmt.Errorf("azure: %w: the secret holds management credentials (a service principal or workload identity), which only a BackupBucket takes; a BackupEntry needs its bucket's generated secret (%s, %s)",
			objectstore.ErrInvalidCredentials, KeyStorageAccount, KeyStorageKey)
	}
	var err error
	if c.account, err = required(KeyStorageAccount); err != nil {
		return c, err
	}
	if c.key, err = required(KeyStorageKey); err != nil {
		return c, err
	}
	if _, err := base64.StdEncoding.DecodeString(c.key); err != nil {
		return c, fmt.Errorf("azure: %w: %q is not base64", objectstore.ErrInvalidCredentials, KeyStorageKey)
	}
	if !validAccountName(c.account) {
		return c, fmt.Errorf("azure: %w: %q must be 3 to 24 lower-case letters and digits", objectstore.ErrInvalidCredentials, KeyStorageAccount)
	}
	c.domain = strings.TrimSpace(string(data[KeyDomain]))
	c.endpoint = strings.TrimSpace(string(data[KeyEndpoint]))

	switch {
	case c.endpoint != "":
		u, err := url.Parse(c.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return c, fmt.Errorf("azure: %w: %q must be an http(s) URL without user, query or fragment, like https://<account>.blob.core.windows.net or http://127.0.0.1:10000/<account>", objectstore.ErrInvalidCredentials, KeyEndpoint)
		}
		c.serviceURL = strings.TrimRight(c.endpoint, "/")
	default:
		domain := c.domain
		if domain == "" {
			domain = DefaultDomain
		}
		if !validDomain(domain) {
			return c, fmt.Errorf("azure: %w: %q must be a host name like %s (no scheme, no path)", objectstore.ErrInvalidCredentials, KeyDomain, DefaultDomain)
		}
		c.serviceURL = "https://" + c.account + "." + domain
	}
	return c, nil
}

// validAccountName: Azure storage account names are 3 to 24 lower-case letters and digits.
func validAccountName(s string) bool {
	if len(s) < 3 || len(s) > 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// validDomain accepts a DNS name with an optional port.
func validDomain(s string) bool {
	host, port, hasPort := strings.Cut(s, ":")
	if host == "" || strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") || strings.Contains(host, "..") {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			return false
		}
	}
	if hasPort {
		if port == "" || len(port) > 5 {
			return false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return false
			}
		}
	}
	return true
}

// EtcdbrStore: etcd-backup-restore's ABS store, at the secret's endpoint if it names one.
func (p *Provider) EtcdbrStore(_ objectstore.Where, credentials map[string][]byte) (objectstore.EtcdbrStore, error) {
	return objectstore.EtcdbrStore{Provider: "ABS", EndpointOverride: string(credentials[KeyEndpoint]),
		CredentialsEnv: "AZURE_APPLICATION_CREDENTIALS"}, nil
}
