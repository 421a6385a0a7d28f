package entry

import (
	"context"
	"sync"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"golang.org/x/sync/singleflight"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// open opens the entry's bucket (Buckets.Open); a warm instance reuses the store of a
// non-source entry's bucket for a while (openStores).
func (p *Purger) open(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Store, error) {
	buckets := gardener.Buckets{Client: p.Client, Providers: p.Providers}
	if gardener.IsSourceEntry(be.Name) {
		return buckets.Open(ctx, be)
	}
	return p.stores.getOrOpen(be.Spec.BucketName, func() (objectstore.Store, error) { return buckets.Open(ctx, be) })
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
