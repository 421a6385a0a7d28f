package purge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

// genName builds a BackupEntry-like name from pieces that make prefixes dangerous: dots,
// dashes, source- prefixes, and names that are prefixes of other names.
func genName(r *rand.Rand, existing []string) string {
	if len(existing) > 0 && r.IntN(3) == 0 {
		base := existing[r.IntN(len(existing))]
		suffixes := []string{"0", "1", "-", ".x", "--2", "0/", "a"}
		return strings.TrimSuffix(base+suffixes[r.IntN(len(suffixes))], "/")
	}
	parts := []string{"shoot", "dev", "a", "b.c", "x-y", "1", "10"}
	n := 2 + r.IntN(3)
	var b strings.Builder
	if r.IntN(4) == 0 {
		b.WriteString(gardener.SourcePrefix)
	}
	for i := range n {
		if i > 0 {
			b.WriteString([]string{"--", "-", "."}[r.IntN(3)])
		}
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// Whatever the names, purging one entry deletes exactly the objects under its prefix.
func TestDeletePrefixNeverDeletesOutsideThePrefix(t *testing.T) {
	ctx := context.Background()
	for seed := range 40 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		store := openLocal(t, fmt.Sprintf("bucket-%d", seed))
		var names []string
		for range 3 + r.IntN(6) {
			names = append(names, genName(r, names))
		}
		var all []string
		put := func(key string) {
			if err := store.Put(ctx, key, []byte("x")); err == nil {
				all = append(all, key)
			}
		}
		for _, n := range names {
			p := gardener.EntryPrefix(n)
			put(p + "etcd-main/v2/Full-00000000-00000001-1")
			put(p + "etcd-events/v2/Incr-00000002-00000003-2.gz")
			put(strings.TrimSuffix(p, "/") + "-sibling-file") // same start, no slash
		}
		put("root-object")
		victim := names[r.IntN(len(names))]
		prefix := gardener.EntryPrefix(victim)

		deleted, err := DeletePrefix(ctx, store, prefix, 1, nil)
		if err != nil {
			t.Fatalf("seed %d: purging %q: %v", seed, prefix, err)
		}
		left := listAll(t, store)
		for _, k := range all {
			inside := strings.HasPrefix(k, prefix)
			if gone := !slices.Contains(left, k); gone != inside {
				t.Errorf("seed %d, names %q, purged %q: %s was inside=%v, gone=%v", seed, names, prefix, k, inside, gone)
			}
		}
		want := 0
		for _, k := range all {
			if strings.HasPrefix(k, prefix) {
				want++
			}
		}
		if deleted != want {
			t.Errorf("seed %d: DeletePrefix reported %d deleted, %d were under %q", seed, deleted, want, prefix)
		}
	}
}

func TestDeletePrefixRefusesTheWholeBucket(t *testing.T) {
	store := openLocal(t, "bucket")
	for _, prefix := range []string{"", "/", "no-slash"} {
		if _, err := DeletePrefix(context.Background(), store, prefix, 1, nil); err == nil {
			t.Errorf("prefix %q accepted", prefix)
		}
	}
}

func openLocal(t *testing.T, bucket string) objectstore.Store {
	t.Helper()
	store, err := local.New(t.TempDir()).Open(bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store
}

func listAll(t *testing.T, store objectstore.Store) []string {
	t.Helper()
	var keys []string
	if err := store.List(context.Background(), "", func(page []string) error { keys = append(keys, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// forgetfulStore reports every delete a success and keeps listing the keys: a store whose
// listing lags, or a bug.
type forgetfulStore struct {
	objectstore.Store
	keys    []string
	deletes int
}

func (s *forgetfulStore) List(_ context.Context, prefix string, fn func([]string) error) error {
	return fn(slices.Clone(s.keys))
}

func (s *forgetfulStore) DeleteKeys(_ context.Context, keys []string) (map[string]error, error) {
	s.deletes++
	return nil, nil
}

// A listing that keeps returning keys whose deletion reported success ends in an error that
// names the problem, not in an endless loop.
func TestDeletePrefixStopsWhenTheStoreKeepsListingDeletedKeys(t *testing.T) {
	store := &forgetfulStore{keys: []string{"shoot--a--b--1/etcd-main/v2/Full-1", "shoot--a--b--1/etcd-main/v2/Full-2"}}
	done := make(chan error, 1)
	go func() {
		_, err := DeletePrefix(context.Background(), store, "shoot--a--b--1/", 3, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "still lists shoot--a--b--1/etcd-main/v2/Full-1") {
			t.Fatalf("error %v, want one that names the key still listed", err)
		}
		if store.deletes > 5 {
			t.Errorf("%d delete rounds before giving up", store.deletes)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DeletePrefix loops on a store that keeps listing deleted keys")
	}
}
