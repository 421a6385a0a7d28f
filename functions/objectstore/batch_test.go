package objectstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

func TestKeysToDeleteDropsRepeatsAndSetsInvalidKeysAside(t *testing.T) {
	todo, failed := objectstore.KeysToDelete([]string{"a/1", "", "a/2", "a/1"})
	if !slices.Equal(todo, []string{"a/1", "a/2"}) {
		t.Errorf("todo %q, want [a/1 a/2]", todo)
	}
	if len(failed) != 1 || !errors.Is(failed[""], objectstore.ErrInvalidKey) {
		t.Errorf("failed %v, want the empty key with objectstore.ErrInvalidKey", failed)
	}
}

func TestDeleteInBatches(t *testing.T) {
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	id := func(k string) string { return k }
	throttled := fmt.Errorf("batch: %w", objectstore.ErrThrottled)

	t.Run("a batch failing alone fails its keys, the others go on", func(t *testing.T) {
		var mu sync.Mutex
		var sizes []int
		failed := map[string]error{"bad": objectstore.ErrInvalidKey}
		err := objectstore.DeleteInBatches(context.Background(), keys, 4, 2, id, func(_ context.Context, batch []string) (map[string]error, error) {
			mu.Lock()
			sizes = append(sizes, len(batch))
			mu.Unlock()
			if batch[0] == "k04" {
				return nil, throttled
			}
			if batch[0] == "k08" {
				return map[string]error{"k09": objectstore.ErrObjectLocked}, nil
			}
			return nil, nil
		}, failed)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(sizes)
		if !slices.Equal(sizes, []int{2, 4, 4}) {
			t.Errorf("batch sizes %v, want [2 4 4]", sizes)
		}
		want := []string{"bad", "k04", "k05", "k06", "k07", "k09"}
		if got := slices.Sorted(maps.Keys(failed)); !slices.Equal(got, want) {
			t.Errorf("failed keys %q, want %q", got, want)
		}
		if !errors.Is(failed["k05"], objectstore.ErrThrottled) || !errors.Is(failed["k09"], objectstore.ErrObjectLocked) {
			t.Errorf("failed %v: the batch's and the key's own errors are not kept", failed)
		}
	})

	t.Run("a failure every key would meet ends the call", func(t *testing.T) {
		gone := fmt.Errorf("container: %w", objectstore.ErrBucketNotFound)
		err := objectstore.DeleteInBatches(context.Background(), keys, 4, 1, id, func(context.Context, []string) (map[string]error, error) {
			return nil, gone
		}, map[string]error{})
		if !errors.Is(err, objectstore.ErrBucketNotFound) {
			t.Errorf("error %v, want objectstore.ErrBucketNotFound", err)
		}
	})

	t.Run("the first error of a key stays", func(t *testing.T) {
		type version struct{ key, id string }
		versions := []version{{"k", "v1"}, {"k", "v2"}}
		failed := map[string]error{}
		first := errors.New("v1 failed")
		err := objectstore.DeleteInBatches(context.Background(), versions, 1, 1, func(v version) string { return v.key },
			func(_ context.Context, batch []version) (map[string]error, error) {
				if batch[0].id == "v1" {
					return map[string]error{"k": first}, nil
				}
				return map[string]error{"k": errors.New("v2 failed")}, nil
			}, failed)
		if err != nil || failed["k"] != first {
			t.Errorf("failed %v, err %v; want k's first error", failed, err)
		}
	})
}

// A Batcher's batches hold at most what the server's Limit says (Size still caps it); a limit of
// 0 means no batch delete at all, and a single key asks nothing.
func TestBatcherTakesTheServersLimit(t *testing.T) {
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	for _, tc := range []struct {
		name       string
		size, lim  int
		wantSizes  []int
		wantSingle int
	}{
		{"lower than Size", 8, 3, []int{3, 3, 3}, 1}, // a batch of one is a single delete
		{"higher than Size", 4, 100, []int{2, 4, 4}, 0},
		{"no batch delete", 4, 0, nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int
			singles, asked := 0, 0
			b := &objectstore.Batcher{Size: tc.size, Concurrency: 2,
				Limit: func(context.Context) int { asked++; return tc.lim }, // asked before any batch starts
				Batch: func(_ context.Context, batch []string) (map[string]error, bool, error) {
					mu.Lock()
					defer mu.Unlock()
					sizes = append(sizes, len(batch))
					return nil, false, nil
				},
				One: func(context.Context, string) (bool, error) {
					mu.Lock()
					defer mu.Unlock()
					singles++
					return false, nil
				},
				Bucket: func(context.Context) error { return nil },
			}
			if failed, err := b.DeleteKeys(context.Background(), keys); err != nil || failed != nil {
				t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
			}
			slices.Sort(sizes)
			if !slices.Equal(sizes, tc.wantSizes) || singles != tc.wantSingle {
				t.Errorf("batches of %v and %d single deletes, want %v and %d", sizes, singles, tc.wantSizes, tc.wantSingle)
			}
			if _, err := b.DeleteKeys(context.Background(), keys[:1]); err != nil || asked != 1 {
				t.Errorf("deleting one key: %v, the limit asked %d times in all, want once (for the first call)", err, asked)
			}
		})
	}
}
