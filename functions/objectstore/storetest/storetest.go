// Package storetest is the conformance test every objectstore provider passes: the semantics
// the bucket, entry and purge functions rely on, checked the same way against a real Azure
// emulator and a real directory.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Option adjusts the suite to the stores under test.
type Option func(*config)

type config struct {
	pageSize int
	// open opens another bucket of the server under test (CopyFrom's source).
	open func(t *testing.T, bucket string) objectstore.Store
}

// WithPageSize tells the suite the list page size of the stores open returns (a provider's
// test hook), so that paging is exercised with few keys. Default objectstore.MaxPageSize.
func WithPageSize(n int) Option { return func(c *config) { c.pageSize = n } }

// Run runs the conformance tests. open returns a store for bucket, which must not exist yet;
// every subtest uses its own bucket name. Subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T, bucket string) objectstore.Store, opts ...Option) {
	cfg := config{pageSize: objectstore.MaxPageSize, open: open}
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s objectstore.Store, cfg config)
	}{
		{"CreateIsIdempotent", testCreateIsIdempotent},
		{"ListLexicalOrder", testListLexicalOrder},
		{"ListPrefix", testListPrefix},
		{"ListPaging", testListPaging},
		{"ListCallbackErrorStops", testListCallbackErrorStops},
		{"ListCancelled", testListCancelled},
		{"MissingBucket", testMissingBucket},
		{"UploadReplaces", testUploadReplaces},
		{"UploadInvalidKey", testUploadInvalidKey},
		{"DeleteKeysOnlyThoseGiven", testDeleteKeysOnlyThoseGiven},
		{"DeleteKeysEdgeCases", testDeleteKeysEdgeCases},
		{"DeleteKeysConcurrent", testDeleteKeysConcurrent},
		{"DeleteBucket", testDeleteBucket},
		{"UploadStreams", testUploadStreams},
		{"UploadFailureLeavesNothing", testUploadFailureLeavesNothing},
		{"StatMD5", testStatMD5},
		{"OpenReadsUpload", testOpenReadsUpload},
		{"OpenMissingKey", testOpenMissingKey},
		{"OpenMissingBucket", testOpenMissingBucket},
		{"OpenCancelled", testOpenCancelled},
		{"CopyFrom", testCopyFrom},
	}
	for i, tc := range tests {
		bucket := fmt.Sprintf("conformance-%02d-%s", i, strings.ToLower(tc.name))
		bucket = bucket[:min(len(bucket), 63)]
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, bucket)
			tc.fn(t, s, cfg)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustCreate(t *testing.T, s objectstore.Store) {
	t.Helper()
	if err := s.Create(ctx(t)); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

// PutAll writes keys with up to 16 writers at once, failing the test on an error.
func PutAll(t testing.TB, s objectstore.Store, keys []string) {
	t.Helper()
	if err := putAll(s, keys); err != nil {
		t.Fatal(err)
	}
}

func putAll(s objectstore.Store, keys []string) error {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, 16)
	)
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := objectstore.PutBytes(c, s, k, []byte("data of "+k)); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("put %q: %w", k, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// ListPages returns the pages List hands out, failing the test on an error.
func ListPages(t testing.TB, s objectstore.Store, prefix string) [][]string {
	t.Helper()
	var pages [][]string
	err := s.List(context.Background(), prefix, func(keys []string) error {
		pages = append(pages, slices.Clone(keys))
		return nil
	})
	if err != nil {
		t.Fatalf("List %q: %v", prefix, err)
	}
	return pages
}

// ListAll returns every key under prefix, checking the page contract on the way: no empty
// page, none larger than objectstore.MaxPageSize, lexical order across pages.
func ListAll(t testing.TB, s objectstore.Store, prefix string) []string {
	t.Helper()
	var all []string
	for i, p := range ListPages(t, s, prefix) {
		if len(p) == 0 || len(p) > objectstore.MaxPageSize {
			t.Errorf("List %q: page %d holds %d keys, want 1..%d", prefix, i, len(p), objectstore.MaxPageSize)
		}
		all = append(all, p...)
	}
	if !slices.IsSorted(all) {
		t.Errorf("List %q: keys not in lexical order: %q", prefix, all)
	}
	return all
}

func shuffled(keys []string) []string {
	out := slices.Clone(keys)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func testCreateIsIdempotent(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, []string{"kept/object"})
	if err := s.Create(ctx(t)); err != nil {
		t.Fatalf("second Create of an existing bucket: %v", err)
	}
	equal(t, "keys after a second Create", ListAll(t, s, ""), []string{"kept/object"})
}

// Keys chosen so that directory-walk order and lexical order differ: '-' (0x2d) and '.'
// (0x2e) sort before '/' (0x2f), '0' (0x30) after it.
var orderKeys = []string{
	"a-c",
	"a.d",
	"a/b",
	"a/z/y",
	"a0",
	"b/x-z",
	"b/x/y",
	"shoot--p--s--1/etcd-main/v2/Full-00000000-00000001-1",
	"shoot--p--s--1/etcd-main/v2/Incr-00000002-00000003-2",
	"shoot--p--s--10/etcd-main/v2/Full-00000000-00000001-1",
	"shoot--p--s--1x",
}

func testListLexicalOrder(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	equal(t, "empty bucket", ListAll(t, s, ""), nil)
	PutAll(t, s, shuffled(orderKeys))
	want := slices.Clone(orderKeys)
	slices.Sort(want)
	equal(t, "List", ListAll(t, s, ""), want)
}

func testListPrefix(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, shuffled(orderKeys))
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		// The purge prefix ends in "/": entry ...--1 must not reach into ...--10.
		{"shoot--p--s--1/", []string{
			"shoot--p--s--1/etcd-main/v2/Full-00000000-00000001-1",
			"shoot--p--s--1/etcd-main/v2/Incr-00000002-00000003-2",
		}},
		// A prefix is a string prefix, not a directory.
		{"shoot--p--s--1", []string{
			"shoot--p--s--1/etcd-main/v2/Full-00000000-00000001-1",
			"shoot--p--s--1/etcd-main/v2/Incr-00000002-00000003-2",
			"shoot--p--s--10/etcd-main/v2/Full-00000000-00000001-1",
			"shoot--p--s--1x",
		}},
		{"a", []string{"a-c", "a.d", "a/b", "a/z/y", "a0"}},
		{"a/", []string{"a/b", "a/z/y"}},
		{"a/z", []string{"a/z/y"}},
		{"b/x", []string{"b/x-z", "b/x/y"}},
		{"shoot--p--s--1/etcd-main/v2/Incr", []string{"shoot--p--s--1/etcd-main/v2/Incr-00000002-00000003-2"}},
		{"nothing-here/", nil},
		{"a/b/", nil},
	} {
		equal(t, fmt.Sprintf("List %q", tc.prefix), ListAll(t, s, tc.prefix), tc.want)
	}
}

func testListPaging(t *testing.T, s objectstore.Store, cfg config) {
	mustCreate(t, s)
	size := cfg.pageSize
	n := 2*size + 3
	if size >= objectstore.MaxPageSize {
		// Too many objects for a test at the real page size: check what can be checked.
		n = 25
	}
	var keys []string
	for i := range n {
		// Spread over directories so a walk crosses directory boundaries mid-page.
		keys = append(keys, fmt.Sprintf("entry/etcd-%d/v2/Full-%05d", i%3, i))
	}
	PutAll(t, s, keys)
	PutAll(t, s, []string{"entrz/outside", "entry-x", "entry.y/z"}) // around the prefix, not under it
	pages := ListPages(t, s, "entry/")
	var got []string
	for i, p := range pages {
		if len(p) == 0 || len(p) > size {
			t.Errorf("page %d holds %d keys, want 1..%d", i, len(p), size)
		}
		if i < len(pages)-1 && len(p) != size {
			t.Logf("page %d holds %d keys, fewer than the page size %d (allowed, unusual)", i, len(p), size)
		}
		got = append(got, p...)
	}
	if wantPages := (n + size - 1) / size; len(pages) < wantPages {
		t.Errorf("%d keys came in %d pages, want at least %d of at most %d", n, len(pages), wantPages, size)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	equal(t, "keys across pages", got, want)
}

func testListCallbackErrorStops(t *testing.T, s objectstore.Store, cfg config) {
	mustCreate(t, s)
	n := min(cfg.pageSize+1, 40)
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("k/%03d", i))
	}
	PutAll(t, s, keys)
	stop := errors.New("stop here")
	calls := 0
	err := s.List(ctx(t), "k/", func([]string) error { calls++; return stop })
	if !errors.Is(err, stop) {
		t.Errorf("List returned %v, want the callback's error", err)
	}
	if calls != 1 {
		t.Errorf("callback called %d times after it failed, want 1", calls)
	}
}

func testListCancelled(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, []string{"x/1", "x/2"})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := s.List(c, "", func([]string) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context returned %v, want context.Canceled", err)
	}
	if called {
		t.Error("List with a cancelled context called the callback")
	}
	if _, err := s.DeleteKeys(c, []string{"x/1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteKeys with a cancelled context returned %v, want context.Canceled", err)
	}
	equal(t, "keys after cancelled calls", ListAll(t, s, ""), []string{"x/1", "x/2"})
}

func testMissingBucket(t *testing.T, s objectstore.Store, _ config) {
	// Never created.
	called := false
	err := s.List(ctx(t), "", func([]string) error { called = true; return nil })
	if !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("List of a missing bucket: %v, want ErrBucketNotFound", err)
	}
	if called {
		t.Error("List of a missing bucket called the callback")
	}
	if _, err := s.Upload(ctx(t), "k", strings.NewReader("v")); !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("Upload into a missing bucket: %v, want ErrBucketNotFound", err)
	}
	failed, err := s.DeleteKeys(ctx(t), []string{"a", "b/c"})
	if !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("DeleteKeys in a missing bucket: failed=%v err=%v, want ErrBucketNotFound", failed, err)
	}
	if err := s.Delete(ctx(t)); err != nil {
		t.Errorf("Delete of a missing bucket: %v, want nil", err)
	}
}

func testUploadReplaces(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	for _, v := range []string{"one", "two", ""} {
		if _, err := s.Upload(ctx(t), "dir/key", strings.NewReader(v)); err != nil {
			t.Fatalf("Upload %q: %v", v, err)
		}
	}
	equal(t, "keys after three Uploads of one key", ListAll(t, s, ""), []string{"dir/key"})
}

func testUploadInvalidKey(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	for _, key := range []string{"", strings.Repeat("k", objectstore.MaxKeyLength+1)} {
		if _, err := s.Upload(ctx(t), key, strings.NewReader("v")); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("Upload of a %d-byte key: %v, want ErrInvalidKey", len(key), err)
		}
	}
	equal(t, "keys after rejected Uploads", ListAll(t, s, ""), nil)
}

func testDeleteKeysOnlyThoseGiven(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	var inside []string
	for i := range 30 {
		inside = append(inside, fmt.Sprintf("shoot--p--s--1/etcd-%s/v2/Full-%03d", []string{"main", "events"}[i%2], i))
	}
	outside := []string{
		"shoot--p--s--10/etcd-main/v2/Full-000",
		"shoot--p--s--1x",
		"shoot--p--s--2/etcd-main/v2/Full-000",
		"zzz",
	}
	PutAll(t, s, append(slices.Clone(inside), outside...))

	toDelete := ListAll(t, s, "shoot--p--s--1/")
	equal(t, "listed for deletion", toDelete, sortedCopy(inside))
	toDelete = append(toDelete, "shoot--p--s--1/etcd-main/v2/never-existed", "shoot--p--s--1/no/such/dir/key")
	failed, err := s.DeleteKeys(ctx(t), shuffled(toDelete))
	if err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys: failed=%v err=%v, want neither", failed, err)
	}
	equal(t, "keys left under the deleted prefix", ListAll(t, s, "shoot--p--s--1/"), nil)
	equal(t, "keys left in the bucket", ListAll(t, s, ""), sortedCopy(outside))

	// Deleting again: everything is already gone, which counts as deleted.
	failed, err = s.DeleteKeys(ctx(t), toDelete)
	if err != nil || len(failed) != 0 {
		t.Errorf("second DeleteKeys: failed=%v err=%v, want neither", failed, err)
	}
}

func testDeleteKeysEdgeCases(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, []string{"e/1", "e/2", "e/3", "f/1"})

	failed, err := s.DeleteKeys(ctx(t), nil)
	if err != nil || len(failed) != 0 {
		t.Errorf("DeleteKeys(nil): failed=%v err=%v, want neither", failed, err)
	}
	// Duplicates, an invalid key among valid ones, and "e" — a prefix of objects, not one.
	failed, err = s.DeleteKeys(ctx(t), []string{"e/1", "e/1", "", "e/2", "e"})
	if err != nil {
		t.Fatalf("DeleteKeys: %v", err)
	}
	if len(failed) != 1 || !errors.Is(failed[""], objectstore.ErrInvalidKey) {
		t.Errorf("failed = %v, want only the empty key, with ErrInvalidKey", failed)
	}
	equal(t, "keys left", ListAll(t, s, ""), []string{"e/3", "f/1"})
}

func testDeleteKeysConcurrent(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	var a, b []string
	for i := range 40 {
		a = append(a, fmt.Sprintf("shared/dir-%d/a-%02d", i%4, i))
		b = append(b, fmt.Sprintf("shared/dir-%d/b-%02d", i%4, i))
	}
	PutAll(t, s, a)
	// Delete a while b is being written into the same directories.
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := putAll(s, b); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		for chunk := range slices.Chunk(a, 7) {
			if failed, err := s.DeleteKeys(context.Background(), chunk); err != nil || len(failed) != 0 {
				t.Errorf("DeleteKeys: failed=%v err=%v", failed, err)
			}
		}
	})
	wg.Wait()
	equal(t, "keys left", ListAll(t, s, "shared/"), sortedCopy(b))
}

func testDeleteBucket(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, []string{"x/1", "x/y/2", "z"})
	if err := s.Delete(ctx(t)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.List(ctx(t), "", func([]string) error { return nil }); !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("List after Delete: %v, want ErrBucketNotFound", err)
	}
	if err := s.Delete(ctx(t)); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
}

func sortedCopy(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return out
}
