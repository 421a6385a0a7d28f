package swift

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Type is the BackupBucket spec.type this provider serves (upstream's provider-openstack type).
const Type = "openstack"

// Credential keys in the BackupBucket's secret, and region, which entries' etcd-backup secrets
// add (etcd-backup-restore reads it).
const (
	KeyAuthURL                     = "authURL"
	KeyDomainName                  = "domainName"
	KeyTenantName                  = "tenantName"
	KeyUsername                    = "username"
	KeyPassword                    = "password"
	KeyApplicationCredentialID     = "applicationCredentialID"
	KeyApplicationCredentialName   = "applicationCredentialName"
	KeyApplicationCredentialSecret = "applicationCredentialSecret"
	KeyCACert                      = "caCert"
	KeyInsecure                    = "insecure"
	KeyRegion                      = "region"
)

// credentialKeys are the keys Open reads and BackupSecretData passes on.
var credentialKeys = []string{KeyAuthURL, KeyDomainName, KeyTenantName, KeyUsername, KeyPassword, KeyApplicationCredentialID,
	KeyApplicationCredentialName, KeyApplicationCredentialSecret, KeyCACert, KeyInsecure}

// Provider opens Swift containers.
type Provider struct {
	opts   options
	region string // spec.region: the catalog region
}

var (
	_ objectstore.Provider = (*Provider)(nil)
	_ objectstore.Regional = (*Provider)(nil)
)

// New returns the Swift provider.
func New(opts ...Option) *Provider {
	o := options{deleteConcurrency: DefaultDeleteConcurrency, batchSize: MaxBulkDelete, listPageSize: MaxListPage}
	for _, opt := range opts {
		opt(&o)
	}
	return &Provider{opts: o}
}

// Type returns "openstack".
func (p *Provider) Type() string { return Type }

// InRegion returns the provider for containers in region (the object's spec.region).
func (p *Provider) InRegion(region string) objectstore.Provider {
	cp := *p
	cp.region = strings.TrimSpace(region)
	return &cp
}

// Open returns the store for the container named bucket. It checks the name and the
// credentials and sends no request.
func (p *Provider) Open(bucket string, data map[string][]byte) (objectstore.Store, error) {
	if err := objectstore.ValidateBucketName(bucket); err != nil {
		return nil, fmt.Errorf("swift: %w", err)
	}
	auth, httpClient, err := p.parseCredentials(data)
	if err != nil {
		return nil, err
	}
	s := &store{name: bucket, region: p.region, auth: auth, http: httpClient, opts: p.opts}
	s.deletes = &objectstore.Batcher{Size: p.opts.batchSize, Concurrency: p.opts.deleteConcurrency, Limit: s.bulkLimit,
		Batch: s.bulkDelete, One: s.deleteOne, Bucket: s.container}
	return s, nil
}

// BackupSecretData returns the credential keys as given: what etcd-backup-restore's Swift
// snapstore reads (entries add bucketName and region).
func (p *Provider) BackupSecretData(data map[string][]byte) (map[string][]byte, error) {
	if _, _, err := p.parseCredentials(data); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range credentialKeys {
		if v, ok := data[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (p *Provider) parseCredentials(data map[string][]byte) (gophercloud.AuthOptions, *http.Client, error) {
	get := func(key string) string { return strings.TrimSpace(string(data[key])) }
	missing := func(format string, args ...any) error {
		return fmt.Errorf("swift: %w: "+format, append([]any{objectstore.ErrMissingCredentials}, args...)...)
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("swift: %w: "+format, append([]any{objectstore.ErrInvalidCredentials}, args...)...)
	}
	var a gophercloud.AuthOptions
	for _, key := range []string{KeyAuthURL, KeyDomainName, KeyTenantName} {
		if get(key) == "" {
			return a, nil, missing("secret has no %q", key)
		}
	}
	u, err := url.Parse(get(KeyAuthURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return a, nil, invalid("%q must be an http(s) URL of Keystone, like https://keystone.example.com/v3", KeyAuthURL)
	}
	a = gophercloud.AuthOptions{
		IdentityEndpoint: get(KeyAuthURL), DomainName: get(KeyDomainName), TenantName: get(KeyTenantName),
		Username: get(KeyUsername), AllowReauth: true,
	}
	// Upstream's rules (provider-openstack's ValidateSecrets): a password or an application
	// credential's secret, not both.
	password, appSecret := get(KeyPassword), get(KeyApplicationCredentialSecret)
	switch {
	case password != "" && appSecret != "":
		return a, nil, invalid("the secret has both %q and %q: give one", KeyPassword, KeyApplicationCredentialSecret)
	case password != "":
		if a.Username == "" {
			return a, nil, missing("%q is required with %q", KeyUsername, KeyPassword)
		}
		a.Password = password
	case appSecret != "":
		a.ApplicationCredentialID, a.ApplicationCredentialName = get(KeyApplicationCredentialID), get(KeyApplicationCredentialName)
		if a.ApplicationCredentialID == "" && (a.Username == "" || a.ApplicationCredentialName == "") {
			return a, nil, missing("an application credential needs %q, or %q with %q", KeyApplicationCredentialID, KeyApplicationCredentialName, KeyUsername)
		}
		a.ApplicationCredentialSecret = appSecret
		// Keystone refuses a project scope with an application credential: it has its own.
		a.TenantName, a.DomainName = "", ""
		if a.ApplicationCredentialID == "" {
			a.DomainName = get(KeyDomainName) // the user's domain, which the name needs
		}
	default:
		return a, nil, missing("secret has neither %q nor %q", KeyPassword, KeyApplicationCredentialSecret)
	}
	base := p.opts.transport
	if base == nil {
		base = http.DefaultTransport
	}
	insecure := false
	if v, ok := data[KeyInsecure]; ok && strings.TrimSpace(string(v)) != "" {
		if insecure, err = strconv.ParseBool(strings.TrimSpace(string(v))); err != nil {
			return a, nil, invalid("%q must be true or false", KeyInsecure)
		}
	}
	if ca := data[KeyCACert]; len(ca) > 0 || insecure {
		t, ok := base.(*http.Transport)
		if !ok {
			return a, nil, invalid("%q and %q need the provider's default transport", KeyCACert, KeyInsecure)
		}
		t = t.Clone()
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // upstream's insecure key
		if len(ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return a, nil, invalid("%q holds no PEM certificate", KeyCACert)
			}
			t.TLSClientConfig.RootCAs = pool
		}
		base = t
	}
	return a, &http.Client{Transport: base}, nil
}

var _ objectstore.EntrySecret = (*Provider)(nil)

// EntrySecretData is what provider-openstack adds to an entry's etcd-backup: the region
// (spec.region), with which etcd-backup-restore's Swift store picks the catalog's endpoint.
func (p *Provider) EntrySecretData(e objectstore.Entry) (map[string][]byte, error) {
	return map[string][]byte{KeyRegion: []byte(e.Region)}, nil
}

// EtcdbrStore: etcd-backup-restore's Swift store.
func (p *Provider) EtcdbrStore(objectstore.Where, map[string][]byte) (objectstore.EtcdbrStore, error) {
	return objectstore.EtcdbrStore{Provider: "Swift", CredentialsEnv: "OPENSTACK_APPLICATION_CREDENTIALS"}, nil
}
