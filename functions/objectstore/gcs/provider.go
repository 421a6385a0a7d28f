package gcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/auth"
	authcredentials "cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/credentials/externalaccount"
	"cloud.google.com/go/auth/httptransport"
	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Type is the BackupBucket spec.type this provider serves (upstream's provider-gcp type).
const Type = "gcp"

// BackupBucketConfigKind is provider-gcp's kind of a BackupBucket's providerConfig.
const BackupBucketConfigKind = "BackupBucketConfig"

// defaultEndpoint is GCS's JSON API.
const defaultEndpoint = "https://storage.googleapis.com/storage/v1/"

// Provider opens GCS buckets.
type Provider struct {
	opts     options
	region   string // spec.region: where Create puts a bucket
	endpoint string // the JSON API's base URL, with its trailing /storage/v1/
}

var (
	_ objectstore.Provider   = (*Provider)(nil)
	_ objectstore.Regional   = (*Provider)(nil)
	_ objectstore.Configured = (*Provider)(nil)
)

// New returns the GCS provider.
func New(opts ...Option) *Provider {
	o := options{deleteConcurrency: DefaultDeleteConcurrency, batchSize: MaxBatch, listPageSize: MaxListPage}
	for _, opt := range opts {
		opt(&o)
	}
	return &Provider{opts: o, endpoint: defaultEndpoint}
}

// Type returns "gcp".
func (p *Provider) Type() string { return Type }

// InRegion returns the provider for buckets in region (the object's spec.region), their
// location.
func (p *Provider) InRegion(region string) objectstore.Provider {
	cp := *p
	cp.region = strings.TrimSpace(region)
	return &cp
}

// backupBucketConfig is provider-gcp's BackupBucketConfig.
type backupBucketConfig struct {
	APIVersion   string          `json:"apiVersion"`
	Kind         string          `json:"kind"`
	Immutability json.RawMessage `json:"immutability,omitempty"`
	Store        *struct {
		EndpointOverride *string `json:"endpointOverride,omitempty"`
	} `json:"store,omitempty"`
}

// Configure returns the provider with the settings of a BackupBucket's providerConfig (a
// BackupBucketConfig; nil: none): store.endpointOverride. Immutability is refused: no GCS
// server that housekeeper is tested against keeps a retention policy, and a lock that is only
// believed to hold is worse than none.
func (p *Provider) Configure(config []byte) (objectstore.Provider, error) {
	if len(bytes.TrimSpace(config)) == 0 {
		return p, nil
	}
	var c backupBucketConfig
	if err := yaml.UnmarshalStrict(config, &c); err != nil {
		return nil, fmt.Errorf("gcs: %w: providerConfig is not a %s: %v", objectstore.ErrInvalidConfig, BackupBucketConfigKind, err)
	}
	if c.Kind != BackupBucketConfigKind {
		return nil, fmt.Errorf("gcs: %w: providerConfig has kind %q, want %s", objectstore.ErrInvalidConfig, c.Kind, BackupBucketConfigKind)
	}
	if len(c.Immutability) > 0 && string(c.Immutability) != "null" {
		return nil, fmt.Errorf("gcs: %w: providerConfig.immutability: housekeeper does not keep gcp buckets immutable (no GCS server it is tested against enforces a retention policy); remove it or use upstream provider-gcp", objectstore.ErrInvalidConfig)
	}
	cp := *p
	if c.Store != nil && c.Store.EndpointOverride != nil {
		endpoint, err := jsonAPI(*c.Store.EndpointOverride)
		if err != nil {
			return nil, err
		}
		cp.endpoint = endpoint
	}
	return &cp, nil
}

// jsonAPI is the JSON API's base URL of an endpoint override: as given when it has a path,
// with /storage/v1/ added when it has none.
func jsonAPI(endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("gcs: %w: providerConfig.store.endpointOverride must be an http(s) URL without user, query or fragment, like https://storage.europe-west3.rep.googleapis.com", objectstore.ErrInvalidConfig)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/storage/v1/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// Open returns the store for the GCS bucket named bucket. It checks the name and the
// credentials and sends no request (a workload identity's token is exchanged on first use).
func (p *Provider) Open(bucket string, data map[string][]byte) (objectstore.Store, error) {
	if err := validateBucketName(bucket); err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	c, err := parseCredentials(data)
	if err != nil {
		return nil, err
	}
	hc, err := p.httpClient(c)
	if err != nil {
		return nil, err
	}
	client, err := storage.NewClient(context.Background(), option.WithEndpoint(p.endpoint), option.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("gcs: bucket %q: %w", bucket, err)
	}
	u, _ := url.Parse(p.endpoint) // checked by jsonAPI
	s := &store{
		name: bucket, endpoint: p.endpoint, projectID: c.projectID, region: p.region,
		client: client, http: hc, batchURL: u.Scheme + "://" + u.Host + "/batch/storage/v1", apiPath: u.Path,
		opts: p.opts,
	}
	s.deletes = &objectstore.Batcher{Size: p.opts.batchSize, Concurrency: p.opts.deleteConcurrency, Batch: s.sendBatch, One: s.deleteOne, Bucket: s.bucket}
	return s, nil
}

// httpClient is the client every request of a store goes through: authenticated with the
// credentials over https, plain over http.
func (p *Provider) httpClient(c credentials) (*http.Client, error) {
	base := p.opts.transport
	if base == nil {
		base = http.DefaultTransport
	}
	if strings.HasPrefix(p.endpoint, "http://") {
		return &http.Client{Transport: base}, nil
	}
	creds, err := authenticate(c, &http.Client{Transport: base})
	if err != nil {
		return nil, err
	}
	checked := auth.NewCredentials(&auth.CredentialsOptions{
		TokenProvider:          checkedTokens{creds.TokenProvider},
		UniverseDomainProvider: auth.CredentialsPropertyFunc(creds.UniverseDomain),
	})
	hc, err := httptransport.NewClient(&httptransport.Options{Credentials: checked, BaseRoundTripper: base, DisableTelemetry: true})
	if err != nil {
		return nil, fmt.Errorf("gcs: %w", err)
	}
	return hc, nil
}

// authenticate turns credentials into token credentials: a service account's signed JWT, or a
// workload identity's token exchanged at its token_url (and, with an impersonation URL, for a
// service account's token).
func authenticate(c credentials, hc *http.Client) (*auth.Credentials, error) {
	scopes := []string{storage.ScopeFullControl}
	if c.identity == nil {
		creds, err := authcredentials.NewCredentialsFromJSON(authcredentials.ServiceAccount, c.serviceAccount, &authcredentials.DetectOptions{Scopes: scopes, Client: hc})
		if err != nil {
			// The library's words may quote the key; say which key instead.
			return nil, invalid("%q is not a usable service account key", KeyServiceAccountJSON)
		}
		return creds, nil
	}
	a := c.identity.config
	creds, err := externalaccount.NewCredentials(&externalaccount.Options{
		Audience:                       a.Audience,
		SubjectTokenType:               a.SubjectTokenType,
		TokenURL:                       a.TokenURL,
		ServiceAccountImpersonationURL: a.ServiceAccountImpersonationURL,
		UniverseDomain:                 a.UniverseDomain,
		Scopes:                         scopes,
		SubjectTokenProvider:           subjectToken(c.identity.token),
		Client:                         hc,
	})
	if err != nil {
		return nil, invalid("%q: credentialsConfig is not usable: %v", KeyConfig, err)
	}
	return creds, nil
}

// checkedTokens marks a token that could not be had for a reason other than the network or
// the caller's context as a tokenError: the credentials were refused.
type checkedTokens struct{ auth.TokenProvider }

func (c checkedTokens) Token(ctx context.Context) (*auth.Token, error) {
	t, err := c.TokenProvider.Token(ctx)
	var netErr net.Error
	if err != nil && ctx.Err() == nil && !errors.As(err, &netErr) {
		return nil, &tokenError{err}
	}
	return t, err
}

// tokenError is a refused token request. Its words are the token endpoint's (which never
// quotes the credential), or for a service account only the status, since a signing failure
// could quote the key.
type tokenError struct{ err error }

func (e *tokenError) Error() string {
	var ae *auth.Error
	if errors.As(e.err, &ae) {
		status := 0
		if ae.Response != nil {
			status = ae.Response.StatusCode
		}
		return fmt.Sprintf("the token endpoint refused the credentials (HTTP %d)", status)
	}
	return "the token endpoint refused the credentials: " + e.err.Error()
}

// subjectToken hands the workload identity's token to the exchange.
type subjectToken string

func (t subjectToken) SubjectToken(context.Context, *externalaccount.RequestOptions) (string, error) {
	return string(t), nil
}

// BackupSecretData returns the credentials the bucket was opened with, for the generated
// secret: serviceaccount.json (and projectID when given), or a workload identity's config —
// not its token, which the token requestor renews in the BackupBucket's own secret.
func (p *Provider) BackupSecretData(data map[string][]byte) (map[string][]byte, error) {
	if _, err := parseCredentials(data); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range []string{KeyServiceAccountJSON, KeyProjectID, KeyConfig} {
		if v, ok := data[k]; ok {
			out[k] = v
		}
	}
	if _, static := data[KeyServiceAccountJSON]; static {
		delete(out, KeyConfig)
	}
	return out, nil
}

// validateBucketName applies the rules every provider shares and the names GCS reserves.
func validateBucketName(name string) error {
	if err := objectstore.ValidateBucketName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, "goog") || strings.Contains(name, "google") {
		return fmt.Errorf("%w %q: GCS reserves names starting with \"goog\" or containing \"google\"", objectstore.ErrInvalidBucketName, name)
	}
	return nil
}

// EtcdbrStore: etcd-backup-restore's GCS store, at the BackupBucket's
// providerConfig.store.endpointOverride if it names one (provider-gcp's seed webhook gives the
// Etcd resource that endpoint).
func (p *Provider) EtcdbrStore(w objectstore.Where, _ map[string][]byte) (objectstore.EtcdbrStore, error) {
	s := objectstore.EtcdbrStore{Provider: "GCS", CredentialsEnv: "GOOGLE_APPLICATION_CREDENTIALS", CredentialsFile: KeyServiceAccountJSON}
	var cfg struct {
		Store *struct {
			EndpointOverride string `json:"endpointOverride"`
		} `json:"store"`
	}
	if len(w.Config) > 0 && json.Unmarshal(w.Config, &cfg) == nil && cfg.Store != nil {
		s.EndpointOverride = cfg.Store.EndpointOverride
	}
	return s, nil
}
