package entry

import (
	"context"
	"fmt"
	"sync"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Buckets opens BackupEntries' buckets as the purge does; the drill opens them the same way.
type Buckets struct {
	Client    client.Reader
	Providers objectstore.Registry
}

// Open opens the entry's bucket. A source- entry's bucket belongs to the source seed: it is
// opened, as upstream does, with the entry's own spec.type, spec.region and spec.secretRef. Any
// other entry uses its BackupBucket's credentials, so that a purge works even when the entry's
// own secret is gone (gardener#2557), and its own secret when this seed has no such
// BackupBucket. A bucket whose secret holds management credentials (an Azure service principal)
// is opened with the storage credentials it published, its generated secret. An absent
// BackupBucket object never means the backups are gone: only the store can say that.
func (b Buckets) Open(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Store, error) {
	w, credentials, err := b.Credentials(ctx, be)
	if err != nil {
		return nil, err
	}
	_, store, err := b.Providers.Open(w, credentials)
	return store, gardener.FromStore(err)
}

// Credentials is where the entry's bucket is and the credentials Open opens it with, chosen
// as Open chooses them; the drill hands the same to etcd-backup-restore's restore.
func (b Buckets) Credentials(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Where, map[string][]byte, error) {
	if gardener.IsSourceEntry(be.Name) {
		return b.with(ctx, be, be.Spec.Type, be.Spec.Region, be.Spec.SecretRef)
	}
	bucket := &extensionsv1alpha1.BackupBucket{}
	switch err := b.Client.Get(ctx, client.ObjectKey{Name: be.Spec.BucketName}, bucket); {
	case err == nil:
		return b.bucketCredentials(ctx, be, bucket)
	case !apierrors.IsNotFound(err):
		return objectstore.Where{}, nil, fmt.Errorf("reading BackupBucket %s: %w", be.Spec.BucketName, err)
	}
	return b.with(ctx, be, be.Spec.Type, be.Spec.Region, be.Spec.SecretRef)
}

// open opens the entry's bucket (Buckets.Open); a warm instance reuses the store of a
// non-source entry's bucket for a while (openStores).
func (p *Purger) open(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Store, error) {
	buckets := Buckets{Client: p.Client, Providers: p.Providers}
	if gardener.IsSourceEntry(be.Name) {
		return buckets.Open(ctx, be)
	}
	return p.stores.getOrOpen(be.Spec.BucketName, func() (objectstore.Store, error) { return buckets.Open(ctx, be) })
}

// openBucket opens be's bucket with its BackupBucket's credentials (bucketCredentials).
func (b Buckets) openBucket(ctx context.Context, be *extensionsv1alpha1.BackupEntry, bucket *extensionsv1alpha1.BackupBucket) (objectstore.Store, error) {
	w, credentials, err := b.bucketCredentials(ctx, be, bucket)
	if err != nil {
		return nil, err
	}
	_, store, err := b.Providers.Open(w, credentials)
	return store, gardener.FromStore(err)
}

// bucketCredentials are the BackupBucket's credentials for be's bucket, or its generated
// secret's when those are management credentials.
func (b Buckets) bucketCredentials(ctx context.Context, be *extensionsv1alpha1.BackupEntry, bucket *extensionsv1alpha1.BackupBucket) (objectstore.Where, map[string][]byte, error) {
	w := objectstore.Where{Type: bucket.Spec.Type, Region: bucket.Spec.Region, Bucket: be.Spec.BucketName, Config: gardener.ProviderConfig(bucket)}
	provider, err := b.Providers.Provider(w)
	if err != nil {
		return w, nil, gardener.FromStore(err) // before reading a secret that would not help
	}
	credentials, err := gardener.ReadSecretData(ctx, b.Client, bucket.Spec.SecretRef)
	if err != nil {
		return w, nil, err
	}
	if _, manages := objectstore.AsProvisioner(provider, credentials); manages {
		ref := bucket.Status.GeneratedSecretRef
		if ref == nil {
			ref = &be.Spec.SecretRef // not published yet: the entry's copy is all there is
		}
		if credentials, err = gardener.ReadSecretData(ctx, b.Client, *ref); err != nil {
			return w, nil, err
		}
	}
	return w, credentials, nil
}

// with is be's bucket with the provider, region and credentials given.
func (b Buckets) with(ctx context.Context, be *extensionsv1alpha1.BackupEntry, providerType, region string, secretRef corev1.SecretReference) (objectstore.Where, map[string][]byte, error) {
	w := objectstore.Where{Type: providerType, Region: region, Bucket: be.Spec.BucketName, Config: gardener.ProviderConfig(be)}
	if _, err := b.Providers.Get(providerType); err != nil {
		return w, nil, gardener.FromStore(err) // before reading a secret that would not help
	}
	credentials, err := gardener.ReadSecretData(ctx, b.Client, secretRef)
	if err != nil {
		return w, nil, err
	}
	return w, credentials, nil
}

// storeTTL is how long a warm instance reuses a bucket's store. In a mass deletion every
// purge in a bucket would otherwise read the same BackupBucket and credentials again; a
// rotated credential is picked up after this long, or at once when the old one fails.
const storeTTL = 30 * time.Second

// openStores are the stores this instance opened recently, by bucket.
type openStores struct {
	mu       sync.Mutex
	byBucket map[string]openStore
	// opening makes the purges of a bucket that find no store wait for one open, not each
	// read the BackupBucket and its credentials.
	opening singleflight.Group
}

type openStore struct {
	store objectstore.Store
	until time.Time
}

// getOrOpen returns the bucket's store, opening it with open (once, however many ask at the
// same time) when this instance has none.
func (s *openStores) getOrOpen(bucket string, open func() (objectstore.Store, error)) (objectstore.Store, error) {
	if store := s.get(bucket); store != nil {
		return store, nil
	}
	v, err, _ := s.opening.Do(bucket, func() (any, error) {
		if store := s.get(bucket); store != nil {
			return store, nil // opened while this caller was on its way
		}
		store, err := open()
		if err != nil {
			return nil, err
		}
		s.put(bucket, store)
		return store, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(objectstore.Store), nil
}

func (s *openStores) get(bucket string) objectstore.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.byBucket[bucket]; ok && time.Now().Before(o.until) {
		return o.store
	}
	delete(s.byBucket, bucket)
	return nil
}

func (s *openStores) put(bucket string, store objectstore.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byBucket == nil {
		s.byBucket = map[string]openStore{}
	}
	s.byBucket[bucket] = openStore{store: store, until: time.Now().Add(storeTTL)}
}

// forget drops the bucket's store after it failed: the next purge opens it afresh.
func (s *openStores) forget(bucket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byBucket, bucket)
}
