package objectstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// KeysToDelete is the first step of every DeleteKeys: keys once each, the valid ones in
// todo, the invalid ones in failed (with ErrInvalidKey) — a key deleted twice in one call
// would only report itself missing the second time.
func KeysToDelete(keys []string) (todo []string, failed map[string]error) {
	failed = map[string]error{}
	seen := make(map[string]struct{}, len(keys))
	todo = make([]string, 0, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		if err := ValidateKey(k); err != nil {
			failed[k] = err
			continue
		}
		todo = append(todo, k)
	}
	return todo, failed
}

// DeleteInBatches deletes items (keys, or the versions of keys) with deleteBatch, size at a
// time and up to concurrency batches at once, and adds each key that was not deleted to
// failed (its first error). A batch that fails as a whole fails its keys, unless the failure
// concerns every key alike (AffectsEveryKey): that ends the call with the error.
func DeleteInBatches[T any](ctx context.Context, items []T, size, concurrency int, keyOf func(T) string,
	deleteBatch func(context.Context, []T) (map[string]error, error), failed map[string]error) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for batch := range slices.Chunk(items, size) {
		g.Go(func() error {
			perKey, err := deleteBatch(gctx, batch)
			if err != nil {
				if AffectsEveryKey(err) {
					return err
				}
				perKey = make(map[string]error, len(batch))
				for _, item := range batch {
					perKey[keyOf(item)] = err
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, e := range perKey {
				if _, ok := failed[k]; !ok {
					failed[k] = e
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// AffectsEveryKey says whether err, met deleting some keys, would be met deleting any other:
// a missing bucket, credentials rejected or unusable, a context that ended.
func AffectsEveryKey(err error) bool {
	return errors.Is(err, ErrBucketNotFound) ||
		errors.Is(err, ErrUnauthenticated) ||
		errors.Is(err, ErrUnauthorized) ||
		errors.Is(err, ErrInvalidCredentials) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Failed is what DeleteKeys returns for failed: nil when every key was deleted.
func Failed(failed map[string]error) map[string]error {
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// ErrBatchUnsupported is what a Batcher's Batch returns when the server has no batch delete
// (it answers 404, 405 or 501 to it): the Batcher sends single deletes from then on.
var ErrBatchUnsupported = errors.New("batch delete not supported")

// Batcher is DeleteKeys for stores whose answers say "not found" alike for a key that is gone
// and for a bucket that is (GCS, Swift): it deletes in batches, up to Concurrency at once, a
// key not found counting as deleted once the bucket is known to be there; a missing bucket is
// ErrBucketNotFound. A server without batch delete gets single deletes. Its methods are safe
// for concurrent use.
type Batcher struct {
	Size, Concurrency int
	// Limit, when set, says the most keys the server takes in one batch (Swift: its /info);
	// Size still caps it, and 0 means the server has no batch delete. It is asked at each
	// DeleteKeys with more than one key, so it is the one to keep what it learns.
	Limit func(ctx context.Context) int
	// Batch deletes keys in one request, returning the keys that failed and whether any was not
	// found; ErrBatchUnsupported when the server has no batch delete.
	Batch func(ctx context.Context, keys []string) (failed map[string]error, notFound bool, err error)
	// One deletes a key in a request of its own: notFound when it was not there.
	One func(ctx context.Context, key string) (notFound bool, err error)
	// Bucket reads the bucket: an error wrapping ErrBucketNotFound when it is missing.
	Bucket func(ctx context.Context) error

	unsupported atomic.Bool
}

// DeleteKeys deletes keys as Store.DeleteKeys does.
func (b *Batcher) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	todo, failed := KeysToDelete(keys)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(todo) == 0 {
		return Failed(failed), nil
	}
	var notFound atomic.Bool
	deleteBatch := func(ctx context.Context, keys []string) (map[string]error, error) {
		if len(keys) > 1 && !b.unsupported.Load() {
			failed, nf, err := b.Batch(ctx, keys)
			if !errors.Is(err, ErrBatchUnsupported) {
				if nf {
					notFound.Store(true)
				}
				return failed, err
			}
			b.unsupported.Store(true)
		}
		failed := map[string]error{}
		for _, k := range keys {
			nf, err := b.One(ctx, k)
			switch {
			case err == nil:
				if nf {
					notFound.Store(true)
				}
			case AffectsEveryKey(err):
				return nil, err
			default:
				failed[k] = err
			}
		}
		return failed, nil
	}
	size := b.Size
	if b.Limit != nil && len(todo) > 1 && !b.unsupported.Load() {
		if n := b.Limit(ctx); n < 1 {
			b.unsupported.Store(true)
		} else {
			size = min(size, n)
		}
	}
	if b.unsupported.Load() {
		size = 1
	}
	if err := DeleteInBatches(ctx, todo, size, b.Concurrency, func(k string) string { return k }, deleteBatch, failed); err != nil {
		return nil, err
	}
	if notFound.Load() {
		if err := b.Bucket(ctx); err != nil {
			return nil, err
		}
	}
	return Failed(failed), nil
}
