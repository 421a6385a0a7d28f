package s3

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Type is the BackupBucket spec.type this provider serves (upstream's provider-aws type; any
// S3-compatible endpoint uses it too).
const Type = "aws"

// Credential keys in the BackupBucket's secret and in the generated secret.
const (
	KeyAccessKeyID      = "accessKeyID"
	KeySecretAccessKey  = "secretAccessKey"
	KeyRegion           = "region"
	KeyEndpoint         = "endpoint"
	KeyS3ForcePathStyle = "s3ForcePathStyle"
)

// usEast1 is the region whose buckets are created without a location constraint.
const usEast1 = "us-east-1"

// Provider opens S3 buckets.
type Provider struct {
	opts   options
	region string // spec.region; wins over the credentials' region
}

var (
	_ objectstore.Provider = (*Provider)(nil)
	_ objectstore.Regional = (*Provider)(nil)
)

// New returns the S3 provider.
func New(opts ...Option) *Provider {
	o := options{
		deleteConcurrency: DefaultDeleteConcurrency,
		deleteBatchSize:   MaxDeleteBatch,
		listPageSize:      MaxListPage,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return &Provider{opts: o}
}

// Type returns "aws".
func (p *Provider) Type() string { return Type }

// InRegion returns the provider for buckets in region (the object's spec.region), which
// takes precedence over a region key in the credentials.
func (p *Provider) InRegion(region string) objectstore.Provider {
	cp := *p
	cp.region = strings.TrimSpace(region)
	return &cp
}

// Open returns the store for the S3 bucket named bucket. It checks the name and the
// credentials and sends no request.
func (p *Provider) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	if err := validateBucketName(bucket); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	c, err := p.parseCredentials(credentials)
	if err != nil {
		return nil, err
	}
	opts := awss3.Options{
		Region: c.region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c.accessKeyID, SecretAccessKey: c.secretAccessKey, Source: "housekeeper"}, nil
		}),
		UsePathStyle: c.pathStyle,
		// Checksums only where the API requires them (DeleteObjects): many S3-compatible
		// services (older Ceph RGW, MinIO) reject the SDK's default trailing checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if c.endpoint != "" {
		opts.BaseEndpoint = aws.String(c.endpoint)
	}
	if p.opts.httpClient != nil {
		opts.HTTPClient = p.opts.httpClient
	}
	return &store{name: bucket, region: c.region, client: awss3.New(opts), opts: p.opts}, nil
}

// BackupSecretData returns accessKeyID, secretAccessKey and region (the effective one: the
// spec's if set), and endpoint and s3ForcePathStyle when the credentials hold them — the keys
// etcd-backup-restore's S3 snapstore reads, with trimmed values.
func (p *Provider) BackupSecretData(credentials map[string][]byte) (map[string][]byte, error) {
	c, err := p.parseCredentials(credentials)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		KeyAccessKeyID:     []byte(c.accessKeyID),
		KeySecretAccessKey: []byte(c.secretAccessKey),
		KeyRegion:          []byte(c.region),
	}
	if c.endpoint != "" {
		data[KeyEndpoint] = []byte(c.endpoint)
	}
	if c.pathStyleSet {
		data[KeyS3ForcePathStyle] = []byte(strconv.FormatBool(c.pathStyle))
	}
	return data, nil
}

type credentials struct {
	accessKeyID, secretAccessKey string
	region                       string
	endpoint                     string // as given (trimmed); empty when absent
	pathStyle, pathStyleSet      bool
}

func (p *Provider) parseCredentials(data map[string][]byte) (credentials, error) {
	var c credentials
	required := func(key string) (string, error) {
		v, ok := data[key]
		if !ok {
			return "", fmt.Errorf("s3: %w: secret has no %q", objectstore.ErrMissingCredentials, key)
		}
		s := strings.TrimSpace(string(v))
		if s == "" {
			return "", fmt.Errorf("s3: %w: %q is empty", objectstore.ErrMissingCredentials, key)
		}
		return s, nil
	}
	if _, static := data[KeyAccessKeyID]; !static && len(data[KeyConfig]) > 0 {
		// No STS-capable server runs where housekeeper is tested, so web identity for bucket
		// operations is not offered untested; etcd-backup carries it (roleARN, token) for
		// etcd-backup-restore.
		return c, fmt.Errorf("s3: %w: the secret is a workload identity's (%q): housekeeper opens aws buckets with static keys (%q, %q) only; a workload identity is passed on to etcd-backup-restore in the entries' etcd-backup secrets",
			objectstore.ErrInvalidCredentials, KeyConfig, KeyAccessKeyID, KeySecretAccessKey)
	}
	var err error
	if c.accessKeyID, err = required(KeyAccessKeyID); err != nil {
		return c, err
	}
	if c.secretAccessKey, err = required(KeySecretAccessKey); err != nil {
		return c, err
	}

	c.region = p.region
	if c.region == "" {
		c.region = strings.TrimSpace(string(data[KeyRegion]))
	}
	if c.region == "" {
		return c, fmt.Errorf("s3: %w: no region: set spec.region or the secret's %q", objectstore.ErrMissingCredentials, KeyRegion)
	}
	if !validRegion(c.region) {
		return c, fmt.Errorf("s3: %w: the region (spec.region or the secret's %q) must be 1 to 64 letters, digits, hyphens, underscores or dots", objectstore.ErrInvalidCredentials, KeyRegion)
	}

	if c.endpoint = strings.TrimSpace(string(data[KeyEndpoint])); c.endpoint != "" {
		u, err := url.Parse(c.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
			return c, fmt.Errorf("s3: %w: %q must be an http(s) URL without user, path, query or fragment, like https://s3.example.com or http://127.0.0.1:7070", objectstore.ErrInvalidCredentials, KeyEndpoint)
		}
		c.endpoint = strings.TrimSuffix(c.endpoint, "/")
	}
	if v, ok := data[KeyS3ForcePathStyle]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(string(v)))
		if err != nil {
			return c, fmt.Errorf("s3: %w: %q must be true or false", objectstore.ErrInvalidCredentials, KeyS3ForcePathStyle)
		}
		c.pathStyle, c.pathStyleSet = b, true
	}
	return c, nil
}

// validateBucketName applies the rules every provider shares and S3's reserved prefixes and
// suffixes that those rules let through.
func validateBucketName(name string) error {
	if err := objectstore.ValidateBucketName(name); err != nil {
		return err
	}
	for _, prefix := range []string{"sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, prefix) {
			return fmt.Errorf("%w %q: S3 reserves the prefix %q", objectstore.ErrInvalidBucketName, name, prefix)
		}
	}
	if strings.HasSuffix(name, "-s3alias") {
		return fmt.Errorf("%w %q: S3 reserves the suffix %q", objectstore.ErrInvalidBucketName, name, "-s3alias")
	}
	return nil
}

// validRegion accepts AWS region names and the plainer names S3-compatible services use
// ("default", "garage").
func validRegion(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// EtcdbrStore: etcd-backup-restore's S3 store, at the secret's endpoint if it names one.
func (p *Provider) EtcdbrStore(_ objectstore.Where, credentials map[string][]byte) (objectstore.EtcdbrStore, error) {
	return objectstore.EtcdbrStore{Provider: "S3", EndpointOverride: string(credentials[KeyEndpoint]),
		CredentialsEnv: "AWS_APPLICATION_CREDENTIALS"}, nil
}
