package entry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// errPageFull stops a listing after one page.
var errPageFull = errors.New("page full")

// Purged is what DeletePrefix did.
type Purged struct {
	// Deleted counts the objects deleted.
	Deleted int
	// Locked counts the objects object lock keeps; they are marked for deletion.
	Locked int
	// Until is the latest end of their locks (zero: a legal hold without end).
	Until time.Time
	// Note says what the store could not do for them (no lifecycle rules).
	Note string
}

// add is p and q together: what two stores' purges did.
func (p Purged) add(q Purged) Purged {
	p.Deleted += q.Deleted
	p.Locked += q.Locked
	if q.Until.After(p.Until) {
		p.Until = q.Until
	}
	if p.Note == "" {
		p.Note = q.Note
	}
	return p
}

// DeleteOptions says how DeletePrefix goes about it.
type DeleteOptions struct {
	// Retries is how often keys that failed to delete are tried again, then reported.
	Retries int
	// Progress, if set, hears (0, total) first and then after every page.
	Progress func(deleted, total int)
	// Recheck, if set, is called after each page is listed and before any of it is deleted;
	// its error stops the deletion with that page untouched. A purge re-reads its entry there:
	// a listing can take longer than the entry stays the one that was read.
	Recheck func(context.Context) error
}

// DeletePrefix deletes every object under prefix, and never one outside it, a listing page at
// a time. Each page is listed afresh, so after an interruption it resumes with what is left.
// Objects that object lock keeps are marked for deletion when the store can mark them
// (objectstore.Locking) and counted, not failed: deleting them is the follow-up purge's, when
// their lock ends. Its errors are the object store's (gardener.FromStore), unless they say why
// it refused, or are Recheck's.
func DeletePrefix(ctx context.Context, store objectstore.Store, prefix string, opts DeleteOptions) (Purged, error) {
	var rechecked error
	if recheck := opts.Recheck; recheck != nil {
		opts.Recheck = func(ctx context.Context) error {
			rechecked = recheck(ctx)
			return rechecked
		}
	}
	purged, err := deletePrefix(ctx, store, prefix, opts)
	if err != nil && err == rechecked {
		return purged, err
	}
	return purged, gardener.FromStore(err)
}

func deletePrefix(ctx context.Context, store objectstore.Store, prefix string, opts DeleteOptions) (Purged, error) {
	var out Purged
	if prefix == "" || prefix == "/" || !strings.HasSuffix(prefix, "/") {
		return out, runner.Permanentf("refusing to purge prefix %q", prefix) // never the whole bucket
	}
	retries, progress := opts.Retries, opts.Progress
	if progress == nil {
		progress = func(int, int) {}
	}
	// The count's listing keeps its first page, so the first round need not list again.
	total, page, err := count(ctx, store, prefix)
	if errors.Is(err, objectstore.ErrBucketNotFound) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	progress(0, total)
	locking, _ := store.(objectstore.Locking)
	locked := map[string]bool{}
	stalls := 0
	var previous []string
	for {
		if len(page) == 0 {
			return out, nil
		}
		// A store that reports keys deleted (or "not found") and keeps listing them would make
		// this loop endless: a page that starts with a key already deleted is a stall, and a
		// few in a row end the run with an error (the runner retries it later).
		if slices.Contains(previous, page[0]) {
			if stalls++; stalls > retries {
				return out, gardener.Retryable(fmt.Errorf("object store still lists %s under %s after deleting it %d times: giving up for now", page[0], prefix, stalls),
					gardencorev1beta1.ErrorRetryableInfraDependencies)
			}
		} else {
			stalls = 0
		}
		previous = slices.Clone(page) // deleteWithRetries reuses the page for its retries
		for _, k := range page {
			if !strings.HasPrefix(k, prefix) {
				return out, runner.Permanentf("object store listed %q for prefix %q: refusing to delete outside the prefix", k, prefix)
			}
		}
		if opts.Recheck != nil {
			if err := opts.Recheck(ctx); err != nil {
				return out, err
			}
		}
		marked, err := out.deleteAndMark(ctx, store, locking, page, prefix, retries)
		if err != nil {
			return out, err
		}
		for _, k := range marked {
			locked[k] = true // listed still, and skipped from now on
		}
		progress(out.Deleted+out.Locked, max(total, out.Deleted+out.Locked))
		if page, err = firstPage(ctx, store, prefix, locked); err != nil {
			return out, err
		}
	}
}

// deleteMarked deletes the objects under prefix that are marked for deletion (by a purge whose
// objects object lock kept, or upstream), and never one outside it; what is still locked is
// marked again. It counts the objects without a mark, which it leaves alone. Its errors are
// the object store's (gardener.FromStore), unless they say why it refused.
func deleteMarked(ctx context.Context, store objectstore.Store, locking objectstore.Locking, prefix string, retries int) (Purged, int, error) {
	var marked []string
	unmarked := 0
	err := store.List(ctx, prefix, func(keys []string) error {
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				return runner.Permanentf("object store listed %q for prefix %q: refusing to delete outside the prefix", k, prefix)
			}
			ok, err := locking.Marked(ctx, k)
			if err != nil {
				return err
			}
			if ok {
				marked = append(marked, k)
			} else {
				unmarked++
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, objectstore.ErrBucketNotFound) {
		return Purged{}, 0, gardener.FromStore(err)
	}
	var purged Purged
	for chunk := range slices.Chunk(marked, objectstore.MaxPageSize) {
		if _, err := purged.deleteAndMark(ctx, store, locking, chunk, prefix, retries); err != nil {
			return Purged{}, 0, gardener.FromStore(err)
		}
	}
	return purged, unmarked, nil
}

// deleteAndMark deletes keys under prefix and marks for deletion those that object lock keeps,
// when the store can mark them (locking is not nil), adding both counts and the latest end of
// the locks to out. It returns the keys it marked; any other failure is an error.
func (out *Purged) deleteAndMark(ctx context.Context, store objectstore.Store, locking objectstore.Locking, keys []string, prefix string, retries int) ([]string, error) {
	failed, err := deleteWithRetries(ctx, store, keys, retries)
	if err != nil {
		return nil, err
	}
	out.Deleted += len(keys) - len(failed)
	var locked []string
	for k, err := range failed {
		if locking != nil && errors.Is(err, objectstore.ErrObjectLocked) {
			locked = append(locked, k)
			delete(failed, k)
		}
	}
	if len(failed) > 0 {
		return nil, fmt.Errorf("%d objects under %s could not be deleted, e.g. %w", len(failed), prefix, firstError(failed))
	}
	if len(locked) == 0 {
		return nil, nil
	}
	slices.Sort(locked)
	until, note, err := locking.Mark(ctx, locked)
	if err != nil {
		return nil, fmt.Errorf("marking %d locked objects under %s: %w", len(locked), prefix, err)
	}
	out.Locked += len(locked)
	out.Note = note
	if until.After(out.Until) {
		out.Until = until
	}
	return locked, nil
}

// deleteWithRetries deletes keys, trying the ones that failed again a few times; it returns
// those that still failed.
func deleteWithRetries(ctx context.Context, store objectstore.Store, keys []string, retries int) (map[string]error, error) {
	delay := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		failed, err := store.DeleteKeys(ctx, keys)
		if err != nil || len(failed) == 0 || attempt >= retries {
			return failed, err
		}
		keys = keys[:0]
		for k := range failed {
			keys = append(keys, k)
		}
		select {
		case <-ctx.Done():
			return failed, ctx.Err()
		case <-time.After(delay):
			delay *= 2
		}
	}
}

// count counts the keys under prefix and returns the first page of them.
func count(ctx context.Context, store objectstore.Store, prefix string) (int, []string, error) {
	n := 0
	var first []string
	err := store.List(ctx, prefix, func(keys []string) error {
		if n == 0 {
			first = slices.Clone(keys)
		}
		n += len(keys)
		return nil
	})
	return n, first, err
}

// firstPage lists the first page of keys under prefix that are not in skip (marked locked
// keys, which stay listed).
func firstPage(ctx context.Context, store objectstore.Store, prefix string, skip map[string]bool) ([]string, error) {
	var page []string
	err := store.List(ctx, prefix, func(keys []string) error {
		for _, k := range keys {
			if !skip[k] {
				page = append(page, k)
			}
		}
		if len(page) == 0 {
			return nil // a page of skipped keys: read on
		}
		return errPageFull
	})
	if errors.Is(err, errPageFull) || errors.Is(err, objectstore.ErrBucketNotFound) {
		err = nil
	}
	return page, err
}

// firstError names one failed key and its error: a locked one if any, since no retry helps
// there and the operator must act.
func firstError(failed map[string]error) error {
	var first error
	for k, err := range failed {
		if errors.Is(err, objectstore.ErrObjectLocked) {
			return fmt.Errorf("%s: %w", k, err)
		}
		if first == nil {
			first = fmt.Errorf("%s: %w", k, err)
		}
	}
	return first
}
