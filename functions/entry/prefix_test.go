package entry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
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

// adversarialKeys are other keys around an entry's prefix p (which ends in "/"): the name
// without the slash, runs of slashes, dot segments, unicode, and names that are prefixes of
// each other.
func adversarialKeys(p string) []string {
	name := strings.TrimSuffix(p, "/")
	return []string{
		name,                                               // the entry name itself, no slash
		name + "-sibling-file",                             // same start, no slash
		name + "0/etcd-main/v2/Full",                       // a name this one is a prefix of
		name[:len(name)-1] + "/x",                          // a name that is a prefix of this one
		name + "é/x", "é" + name + "/x", name + "\u00a0/x", // unicode around it
		"../" + name + "/x", name + "/../outside", "a/../" + name + "/x", // dot segments
		name + "//etcd-main//Full", "x//" + name + "/y", // runs of slashes
	}
}

// Whatever the names, purging one entry deletes exactly the objects under its prefix, on every
// provider. Keys a store rejects as invalid are skipped; any other failed put fails the test.
func TestDeletePrefixNeverDeletesOutsideThePrefix(t *testing.T) {
	for _, st := range testStores(t) {
		t.Run(st.name, func(t *testing.T) {
			for seed := range 40 {
				testOneSeed(t, st.open(t, fmt.Sprintf("prop-%d", seed), 0), uint64(seed))
			}
		})
	}
}

func testOneSeed(t *testing.T, store objectstore.Store, seed uint64) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	var names []string
	for range 3 + r.IntN(6) {
		if n := genName(r, names); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var all []string
	rejected := 0
	// put stores a key; only adversarial keys may be rejected as invalid for the store.
	put := func(key string, adversarial bool) {
		if slices.Contains(all, key) {
			return
		}
		err := objectstore.PutBytes(ctx, store, key, []byte("x"))
		switch {
		case adversarial && errors.Is(err, objectstore.ErrInvalidKey):
			rejected++
		case err != nil:
			t.Fatalf("seed %d: put %q: %v", seed, key, err)
		default:
			all = append(all, key)
		}
	}
	for _, n := range names {
		p := gardener.EntryPrefix(n)
		put(p+"etcd-main/v2/Full-00000000-00000001-1", false)
		put(p+"etcd-events/v2/Incr-00000002-00000003-2.gz", false)
	}
	for _, n := range names {
		for _, k := range adversarialKeys(gardener.EntryPrefix(n)) {
			put(k, true)
		}
	}
	put("root-object", false)
	t.Logf("seed %d: %d keys stored, %d adversarial keys rejected as invalid by the store", seed, len(all), rejected)
	victim := names[r.IntN(len(names))]
	prefix := gardener.EntryPrefix(victim)

	purged, err := DeletePrefix(ctx, store, prefix, DeleteOptions{Retries: 1})
	if err != nil {
		t.Fatalf("seed %d: purging %q: %v", seed, prefix, err)
	}
	deleted := purged.Deleted
	left := listAll(t, store)
	want := 0
	for _, k := range all {
		inside := strings.HasPrefix(k, prefix)
		if inside {
			want++
		}
		if gone := !slices.Contains(left, k); gone != inside {
			t.Errorf("seed %d, names %q, purged %q: %q was inside=%v, gone=%v", seed, names, prefix, k, inside, gone)
		}
	}
	if len(left) != len(all)-want {
		t.Errorf("seed %d: %d keys left, want %d: %q", seed, len(left), len(all)-want, left)
	}
	if deleted != want {
		t.Errorf("seed %d: DeletePrefix reported %d deleted, %d were under %q", seed, deleted, want, prefix)
	}
}

// A purge of a prefix spanning several list pages deletes it page by page; interrupted after
// the first page, it resumes with what is left, and never touches a key outside.
func TestDeletePrefixAcrossPagesResumesAfterAnInterruption(t *testing.T) {
	const pageSize, inside = 5, 17 // four pages
	for _, st := range testStores(t) {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t, "paged", pageSize)
			ctx := context.Background()
			prefix := "shoot--dev--paged/"
			var keys, outside []string
			for i := range inside {
				keys = append(keys, fmt.Sprintf("%setcd-%d/v2/Full-%03d", prefix, i%3, i))
			}
			outside = adversarialKeys(prefix)[1:5] // not the bare name: a local bucket cannot hold it beside the prefix
			for _, k := range slices.Concat(keys, outside) {
				if err := objectstore.PutBytes(ctx, store, k, []byte("x")); err != nil {
					t.Fatalf("put %q: %v", k, err)
				}
			}

			interrupted, cancel := context.WithCancel(ctx)
			firstRun, err := DeletePrefix(interrupted, store, prefix, DeleteOptions{Retries: 1, Progress: func(deleted, total int) {
				if deleted > 0 {
					cancel() // between the first page and the second
				}
			}})
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted purge returned %v, want context.Canceled", err)
			}
			if first := firstRun.Deleted; first != pageSize {
				t.Errorf("interrupted after the first page with %d deleted, want %d", first, pageSize)
			}
			if n := len(listPrefix(t, store, prefix)); n != inside-pageSize {
				t.Errorf("%d keys left after the interruption, want %d", n, inside-pageSize)
			}

			pages := 0
			restRun, err := DeletePrefix(ctx, store, prefix, DeleteOptions{Retries: 1, Progress: func(deleted, total int) {
				if deleted > 0 {
					pages++
				}
			}})
			if err != nil {
				t.Fatalf("resumed purge: %v", err)
			}
			if rest := restRun.Deleted; rest != inside-pageSize || pages < 3 {
				t.Errorf("resumed purge deleted %d in %d pages, want %d in at least 3", restRun.Deleted, pages, inside-pageSize)
			}
			if left := listAll(t, store); !slices.Equal(left, sortedCopy(outside)) {
				t.Errorf("left %q, want exactly the keys outside the prefix %q", left, sortedCopy(outside))
			}
		})
	}
}

func sortedCopy(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return out
}

// testStore opens fresh buckets of one provider, with a list page size (0: the default).
type testStore struct {
	name string
	open func(t *testing.T, bucket string, pageSize int) objectstore.Store
}

// testStores are a local directory, Azurite and fake-gcs-server.
func testStores(t *testing.T) []testStore {
	env := testenv.Start(t, testenv.WithAzurite(), testenv.WithGCS())
	key, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	gcsConfig := fmt.Appendf(nil, `{"kind":"BackupBucketConfig","store":{"endpointOverride":%q}}`, env.GCS.Endpoint)
	creds := map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(env.Azurite.Endpoint),
	}
	root := t.TempDir()
	create := func(t *testing.T, store objectstore.Store, err error) objectstore.Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Create(context.Background()); err != nil {
			t.Fatal(err)
		}
		return store
	}
	return []testStore{
		{"local", func(t *testing.T, bucket string, pageSize int) objectstore.Store {
			var opts []local.Option
			if pageSize > 0 {
				opts = append(opts, local.WithListPageSize(pageSize))
			}
			store, err := local.New(root, opts...).Open(bucket, nil)
			return create(t, store, err)
		}},
		{"azure", func(t *testing.T, bucket string, pageSize int) objectstore.Store {
			var opts []azure.Option
			if pageSize > 0 {
				opts = append(opts, azure.WithListPageSize(pageSize))
			}
			store, err := azure.New(opts...).Open(bucket, creds)
			return create(t, store, err)
		}},
		{"gcs", func(t *testing.T, bucket string, pageSize int) objectstore.Store {
			var opts []gcs.Option
			if pageSize > 0 {
				opts = append(opts, gcs.WithListPageSize(pageSize))
			}
			_, store, err := objectstore.NewRegistry(gcs.New(opts...)).Open(objectstore.Where{Type: gcs.Type, Bucket: bucket, Config: gcsConfig},
				map[string][]byte{gcs.KeyServiceAccountJSON: key})
			return create(t, store, err)
		}},
	}
}

func listPrefix(t *testing.T, store objectstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := store.List(context.Background(), prefix, func(page []string) error { keys = append(keys, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestDeletePrefixRefusesTheWholeBucket(t *testing.T) {
	store := openLocal(t, "bucket")
	for _, prefix := range []string{"", "/", "no-slash"} {
		if _, err := DeletePrefix(context.Background(), store, prefix, DeleteOptions{Retries: 1}); err == nil {
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
		_, err := DeletePrefix(context.Background(), store, "shoot--a--b--1/", DeleteOptions{Retries: 3})
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
