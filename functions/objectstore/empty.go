package objectstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// errStop ends a listing early.
var errStop = errors.New("stop listing")

// Empty deletes every object in store, a listing page at a time, and returns the keys object
// lock keeps (ErrObjectLocked): they are skipped from then on, so the loop ends even while
// they stay. Any other failure is an error, and so is a store that keeps listing a key it
// said it deleted. A missing bucket is empty.
func Empty(ctx context.Context, store Store) (locked []string, err error) {
	skip := map[string]bool{}
	var previous string
	stalls := 0
	for {
		page, err := firstPageWithout(ctx, store, skip)
		if errors.Is(err, ErrBucketNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("emptying the bucket: %w", err)
		}
		if len(page) == 0 {
			return slices.Sorted(maps.Keys(skip)), nil
		}
		if page[0] == previous {
			if stalls++; stalls >= 3 {
				return nil, fmt.Errorf("emptying the bucket: %q is still listed after deleting it %d times", previous, stalls)
			}
		} else {
			stalls = 0
		}
		previous = page[0]
		failed, err := store.DeleteKeys(ctx, page)
		if errors.Is(err, ErrBucketNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("emptying the bucket: %w", err)
		}
		for _, k := range page {
			switch kerr, ok := failed[k]; {
			case !ok:
			case errors.Is(kerr, ErrObjectLocked):
				skip[k] = true
			default:
				return nil, fmt.Errorf("emptying the bucket: %d objects could not be deleted, e.g. %w", len(failed), kerr)
			}
		}
	}
}

// EmptyOrMark empties the bucket of a store whose objects object lock can keep: everything is
// deleted but the locked objects, which are marked for deletion and make it a *LockedError that
// says until when the bucket cannot be removed. nil means the bucket is empty (or gone).
func EmptyOrMark[S interface {
	Store
	Locking
}](ctx context.Context, s S, bucket string) error {
	locked, err := Empty(ctx, s)
	if err != nil || len(locked) == 0 {
		return err
	}
	until, _, err := s.Mark(ctx, locked)
	if err != nil {
		return err
	}
	return &LockedError{Bucket: bucket, Count: len(locked), Until: until}
}

// RetentionDays parses an immutability retention period (a Go duration such as "168h") into
// the whole days stores count retention in; it must be at least one.
func RetentionDays(period string) (int32, error) {
	d, err := time.ParseDuration(period)
	if err != nil || d < 24*time.Hour || d%(24*time.Hour) != 0 {
		return 0, fmt.Errorf("retentionPeriod %q: must be a whole number of days, at least 24h (the store retains by days)", period)
	}
	return int32(d / (24 * time.Hour)), nil
}

// firstPageWithout is the first page of keys that are not in skip.
func firstPageWithout(ctx context.Context, store Store, skip map[string]bool) ([]string, error) {
	var page []string
	err := store.List(ctx, "", func(keys []string) error {
		for _, k := range keys {
			if !skip[k] {
				page = append(page, k)
			}
		}
		if len(page) == 0 {
			return nil
		}
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return page, err
}
