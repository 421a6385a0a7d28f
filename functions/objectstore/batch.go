package objectstore

import (
	"context"
	"errors"
	"slices"
	"sync"

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
