package objectstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// MaxPageSize is the most keys List hands to its callback at once (Azure's list page limit).
const MaxPageSize = 5000

// Store is one bucket (an Azure container, an S3 bucket, a local directory).
//
// Keys are object names relative to the bucket, with "/" as the separator; etcd-backup-restore
// writes them as "<entry>/etcd-main/v2/Full-...". Methods are safe for concurrent use.
type Store interface {
	// Create creates the bucket; one that already exists is fine.
	Create(ctx context.Context) error
	// Delete deletes the bucket and all it holds; a missing bucket is fine.
	Delete(ctx context.Context) error
	// List calls fn with the keys under prefix (a plain string prefix, not a directory: pass
	// a trailing "/" to stay inside one), in pages of at most MaxPageSize keys, in lexical
	// (byte) order across pages. fn is never called with an empty page; an error from fn
	// stops the listing and is returned as it is. A missing bucket is ErrBucketNotFound. In a
	// versioned bucket (S3) a key is listed while any version or delete marker of it is left.
	List(ctx context.Context, prefix string, fn func(keys []string) error) error
	// DeleteKeys deletes the keys, with their snapshots (Azure) or every version and delete
	// marker (S3). A key that does not exist counts as
	// deleted. failed names each key that was not deleted and why (a classified error); a
	// caller retries just those. err reports that the call as a whole failed (a missing
	// bucket, bad credentials, a cancelled context): then failed is nil and any key may or
	// may not have been deleted. With err nil, every key not in failed is gone.
	DeleteKeys(ctx context.Context, keys []string) (failed map[string]error, err error)
	// Upload writes an object read from r to its end, replacing one of the same key, and
	// returns how many bytes it wrote. It streams: memory stays bounded (a few parts of a
	// few MiB) whatever the size, and nothing is staged elsewhere first. The object appears
	// whole or not at all (Azure: its blocks are committed at the end; S3: a multipart upload
	// is completed at the end; local: a temporary file beside it is renamed).
	Upload(ctx context.Context, key string, r io.Reader) (int64, error)
	// Stat reports the object at key as the store has it; ErrObjectNotFound if there is none.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Open returns a reader of the object at key from its start, streamed: memory stays bounded
	// whatever the object's size. ErrObjectNotFound if there is none. The caller closes it.
	// Once ctx ends, its reads fail with ctx's error. A read whose connection breaks mid-way
	// resumes where it stopped, a few times, from the same object only: one replaced meanwhile
	// fails the read with ErrObjectChanged (storetest.RunResume).
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// ObjectInfo is what Stat reports of an object.
type ObjectInfo struct {
	Key  string
	Size int64
	// MD5 is the MD5 digest of the object's whole content as the store reports it, without
	// reading the content: S3's ETag of an object written in one PutObject without SSE-KMS or
	// SSE-C, GCS's md5Hash, Swift's ETag of an object that is no large-object manifest, Azure's
	// Content-MD5 when the blob has one (computed by Azure for a blob written in one Put Blob,
	// as Upload writes a body below one block; asserted by its writer for one committed from
	// blocks). It is nil when the store reports
	// none it vouches for (an S3 multipart upload, a GCS composite object, a Swift manifest, a
	// blob committed from blocks without Content-MD5, every local file): callers that need a
	// checksum then read the object. storetest checks every MD5 a provider reports against the
	// content.
	MD5 []byte
}

// HexMD5 is the MD5 digest an ETag of 32 hexadecimal digits spells (surrounding quotes
// trimmed); nil for any other ETag (an S3 multipart upload's "<hex>-<parts>", an opaque one).
// Whether such an ETag is the content's MD5 is the provider's to say.
func HexMD5(etag string) []byte {
	etag = strings.Trim(etag, `"`)
	if len(etag) != 2*md5.Size {
		return nil
	}
	sum, err := hex.DecodeString(etag)
	if err != nil {
		return nil
	}
	return sum
}

// PutBytes writes data as the object at key through s.Upload, replacing one of the same key.
// It is for small objects already in memory, which tests and make faults write (stand-ins
// for etcd-backup-restore's snapshots); housekeeper's functions stream what they write with
// Upload, so a Store needs no second way to write.
func PutBytes(ctx context.Context, s Store, key string, data []byte) error {
	_, err := s.Upload(ctx, key, bytes.NewReader(data))
	return err
}

// UploadPartSize is the part (block) size Upload sends and the most it buffers per part in
// flight; UploadConcurrency the parts in flight at once.
const (
	UploadPartSize    = 8 << 20
	UploadConcurrency = 2
)

// Provider opens stores of one provider type with credentials from a Kubernetes secret's data.
type Provider interface {
	// Type is the BackupBucket spec.type the provider serves: "azure", "aws", "local".
	Type() string
	// Open returns the store for bucket. It validates the bucket name and the credential
	// keys (ErrInvalidBucketName, ErrMissingCredentials, ErrInvalidCredentials) and sends
	// no request: a wrong key shows on first use.
	Open(bucket string, credentials map[string][]byte) (Store, error)
	// BackupSecretData returns the keys etcd-backup-restore reads, for the secret housekeeper
	// generates for a bucket (generated-bucket-<name>), taken from the bucket's credentials.
	BackupSecretData(credentials map[string][]byte) (map[string][]byte, error)
}

// Regional is a Provider whose buckets live in a region (aws). The region comes from the
// BackupBucket's or BackupEntry's spec.region through [InRegion].
type Regional interface {
	Provider
	// InRegion returns the provider for buckets in region, which takes precedence over a
	// region in the credentials, as upstream provider-aws has it.
	InRegion(region string) Provider
}

// InRegion returns p for buckets in region (spec.region): p.InRegion(region) if p is
// [Regional] and region is set, p itself otherwise.
func InRegion(p Provider, region string) Provider {
	if r, ok := p.(Regional); ok && region != "" {
		return r.InRegion(region)
	}
	return p
}

// Configured is a Provider some of whose settings come from the BackupBucket's (a BackupEntry's
// copy of it) spec.providerConfig and concern every request, not just the bucket's creation
// (gcp's store.endpointOverride). Registry.Provider applies it.
type Configured interface {
	Provider
	// Configure returns the provider with the settings of config (nil: none). A malformed
	// config, or one asking for what the provider cannot do, is ErrInvalidConfig naming the
	// field.
	Configure(config []byte) (Provider, error)
}

// EntrySecret is a Provider whose entries' etcd-backup secret holds more than the credentials
// and the bucket name: what etcd-backup-restore needs beside them, as the provider's upstream
// extension writes it (aws and openstack: the region; a workload identity's role or token
// file).
type EntrySecret interface {
	Provider
	// EntrySecretData returns the keys to add for entry; an error names what is wrong with
	// the credentials, never a value.
	EntrySecretData(entry Entry) (map[string][]byte, error)
}

// Entry is what a provider's part of an entry's etcd-backup secret depends on.
type Entry struct {
	// Region is the entry's spec.region.
	Region string
	// WorkloadIdentity is the config of a workload identity's credentials; nil for static ones.
	WorkloadIdentity []byte
	// Source says the entry is a control-plane migration's source- entry, whose token etcd-druid
	// mounts apart from the shoot's own.
	Source bool
}

// Registry chooses a provider by spec.type. A type that maps to nil is linked into the binary
// but not configured.
type Registry map[string]Provider

// Links says whether the binary links the provider of providerType, configured or not.
func (r Registry) Links(providerType string) bool {
	_, ok := r[providerType]
	return ok
}

// NewRegistry registers providers under their Type.
func NewRegistry(providers ...Provider) Registry {
	r := make(Registry, len(providers))
	for _, p := range providers {
		r[p.Type()] = p
	}
	return r
}

// Get returns the provider for providerType, or ErrUnknownType naming the type and the
// known ones.
func (r Registry) Get(providerType string) (Provider, error) {
	if p, ok := r[providerType]; ok && p != nil {
		return p, nil
	}
	if r.Links(providerType) {
		return nil, fmt.Errorf("%w %q: its provider is not configured in this process (the local provider needs --local-root)", ErrUnknownType, providerType)
	}
	known := slices.Sorted(maps.Keys(r))
	if len(known) == 0 {
		return nil, fmt.Errorf("%w %q: no provider is registered", ErrUnknownType, providerType)
	}
	return nil, fmt.Errorf("%w %q: known types are %s", ErrUnknownType, providerType, strings.Join(quote(known), ", "))
}

// Where names a bucket: the provider type (spec.type), the region (spec.region, "" for none),
// the bucket's name and its spec.providerConfig (nil for none).
type Where struct {
	Type, Region, Bucket string
	Config               []byte
}

// Open opens the bucket w names with credentials: the one way every function opens a store.
// It returns the provider in w's region too (the bucket function writes that region into the
// generated secret).
func (r Registry) Open(w Where, credentials map[string][]byte) (Provider, Store, error) {
	p, err := r.Provider(w)
	if err != nil {
		return nil, nil, err
	}
	store, err := p.Open(w.Bucket, credentials)
	if err != nil {
		return nil, nil, err
	}
	return p, store, nil
}

// Provider returns the provider for w's type, in w's region, configured by w's Config.
func (r Registry) Provider(w Where) (Provider, error) {
	p, err := r.Get(w.Type)
	if err != nil {
		return nil, err
	}
	p = InRegion(p, w.Region)
	if c, ok := p.(Configured); ok {
		return c.Configure(w.Config)
	}
	return p, nil
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// Configurable is a Store whose bucket takes settings from the BackupBucket's
// spec.providerConfig (S3's object lock). The bucket function creates such a bucket with
// CreateWithConfig instead of Create.
type Configurable interface {
	// CreateWithConfig creates the bucket with the settings config asks for (nil: none), or
	// brings an existing one to them. It never weakens a setting the bucket has: a weaker ask
	// is kept to the stronger setting and said so in note. A setting the provider cannot
	// honour is ErrInvalidConfig, naming it.
	CreateWithConfig(ctx context.Context, config []byte) (note string, err error)
}

// Locking is a Store whose objects object lock can keep past a purge (S3). A purge marks what
// it cannot delete, and deletes it once the lock ends; the provider's lifecycle rule may get
// there first.
type Locking interface {
	// Mark marks every version of the keys for deletion (S3: the tag gc-marked-for-deletion=true)
	// and makes sure the bucket's lifecycle rule expires marked objects, merged into the rules
	// the bucket has. until is the latest retain-until date among the versions (zero when only
	// a legal hold keeps them); note says what the store could not do (a store without
	// lifecycle rules).
	Mark(ctx context.Context, keys []string) (until time.Time, note string, err error)
	// Marked reports whether every version of key carries the mark: only such keys are deleted
	// by a follow-up purge, whoever asks for it.
	Marked(ctx context.Context, key string) (bool, error)
}
