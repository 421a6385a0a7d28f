package local_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []local.Option
		st   []storetest.Option
	}{
		{"DefaultPageSize", nil, nil},
		{"PageSize7", []local.Option{local.WithListPageSize(7)}, []storetest.Option{storetest.WithPageSize(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := local.New(t.TempDir(), tc.opts...)
			storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
				s, err := p.Open(bucket, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, tc.st...)
		})
	}
}

// fixture is a root with a bucket, a sibling bucket and files around them, all of which a
// test can check were left alone.
type fixture struct {
	root, outside string
	p             *local.Provider
	s             objectstore.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{root: filepath.Join(base, "buckets"), outside: filepath.Join(base, "outside")}
	f.p = local.New(f.root)
	var err error
	if f.s, err = f.p.Open("bucket", map[string][]byte{"anything": []byte("ignored")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.s.Create(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := f.p.Open("other", nil)
	if err := other.Create(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.root, "other", "bucket", "x"))
	write(t, filepath.Join(f.root, "bucket-file"))
	write(t, filepath.Join(f.outside, "victim"))
	write(t, filepath.Join(base, "x"))
	return f
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// untouched checks that everything newFixture put outside the bucket is still there.
func (f *fixture) untouched(t *testing.T) {
	t.Helper()
	base := filepath.Dir(f.root)
	for _, p := range []string{
		filepath.Join(f.root, "other", "bucket", "x"),
		filepath.Join(f.root, "bucket-file"),
		filepath.Join(f.outside, "victim"),
		filepath.Join(base, "x"),
	} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "keep me" {
			t.Errorf("%s was touched: %q, %v", p, b, err)
		}
	}
	var extra []string
	_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if rel, _ := filepath.Rel(f.root, p); rel == "bucket" || strings.HasPrefix(rel, "bucket"+string(filepath.Separator)) {
			return nil
		}
		if !d.IsDir() && filepath.Base(p) != "x" && filepath.Base(p) != "victim" && filepath.Base(p) != "bucket-file" {
			extra = append(extra, p)
		}
		return nil
	})
	if len(extra) > 0 {
		t.Errorf("files appeared outside the bucket: %q", extra)
	}
}

func TestValidateKey(t *testing.T) {
	for _, key := range []string{"a", "a/b", "shoot--p--s--1/etcd-main/v2/Full-1.gz", "a..b", ".hidden/x", "a/.b", "..a"} {
		if err := local.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range []string{"", "/etc/passwd", "../x", "a/../../x", "a/..", "..", ".", "./a", "a/./b", "a//b", "a/", "/", "a\x00b", strings.Repeat("x", 1025)} {
		if err := local.ValidateKey(key); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestEscapingKeysRejected(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bad := []string{"../outside/victim", "../../outside/victim", "/" + filepath.Join(f.outside, "victim"), "a/../../other/bucket/x", "../other/bucket/x", "a//b", "./a"}
	for _, key := range bad {
		if err := objectstore.PutBytes(ctx, f.s, key, []byte("evil")); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("Upload(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	failed, err := f.s.DeleteKeys(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range bad {
		if !errors.Is(failed[key], objectstore.ErrInvalidKey) {
			t.Errorf("DeleteKeys: failed[%q] = %v, want ErrInvalidKey", key, failed[key])
		}
	}
	f.untouched(t)
}

// A symbolic link inside the bucket must not carry an upload, a delete or a listing outside it.
func TestSymlinksDoNotEscape(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bucketDir := filepath.Join(f.root, "bucket")
	if err := os.Symlink(f.outside, filepath.Join(bucketDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../other", filepath.Join(bucketDir, "rel")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"link/victim", "link/new", "rel/bucket/x"} {
		if err := objectstore.PutBytes(ctx, f.s, key, []byte("evil")); err == nil {
			t.Errorf("Upload(%q) through a link out of the bucket succeeded", key)
		}
	}
	failed, err := f.s.DeleteKeys(ctx, []string{"link/victim", "rel/bucket/x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"link/victim", "rel/bucket/x"} {
		if !errors.Is(failed[key], objectstore.ErrInvalidKey) {
			t.Errorf("DeleteKeys: failed[%q] = %v, want ErrInvalidKey", key, failed[key])
		}
	}
	// Listed as keys of their own, never followed.
	if got := storetest.ListAll(t, f.s, ""); !slices.Equal(got, []string{"link", "rel"}) {
		t.Errorf("List = %q, want the links themselves", got)
	}
	// Deleting the link deletes the link, not what it points to.
	if failed, err := f.s.DeleteKeys(ctx, []string{"link", "rel"}); err != nil || len(failed) > 0 {
		t.Fatalf("DeleteKeys of the links: %v %v", failed, err)
	}
	f.untouched(t)
}

// A directory tree cannot hold both "a/b" and "a": a key that names the directory of other
// keys is an invalid key, and they stay as they were.
func TestKeyCannotNameADirectory(t *testing.T) {
	f := newFixture(t)
	storetest.PutAll(t, f.s, []string{"dir/key"})
	if err := objectstore.PutBytes(context.Background(), f.s, "dir", []byte("v")); !errors.Is(err, objectstore.ErrInvalidKey) {
		t.Errorf(`Upload("dir") = %v, want ErrInvalidKey`, err)
	}
	if got := storetest.ListAll(t, f.s, ""); !slices.Equal(got, []string{"dir/key"}) {
		t.Errorf("List = %q, want dir/key alone (no temporary file)", got)
	}
	f.untouched(t)
}

func TestEmptyDirectoriesPruned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bucketDir := filepath.Join(f.root, "bucket")
	storetest.PutAll(t, f.s, []string{"a/b/c/1", "a/b/2", "a/x/3", "keep/4"})
	if err := os.Mkdir(filepath.Join(bucketDir, "unrelated-empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(bucketDir, rel))
		return err == nil
	}
	del := func(keys ...string) {
		t.Helper()
		if failed, err := f.s.DeleteKeys(ctx, keys); err != nil || len(failed) > 0 {
			t.Fatalf("DeleteKeys(%q): %v %v", keys, failed, err)
		}
	}

	del("a/b/c/1")
	if exists("a/b/c") || !exists("a/b") {
		t.Errorf("after deleting a/b/c/1: a/b/c exists=%v (want false), a/b exists=%v (want true)", exists("a/b/c"), exists("a/b"))
	}
	del("a/b/2")
	if exists("a/b") || !exists("a/x") {
		t.Errorf("after deleting a/b/2: a/b exists=%v (want false), a/x exists=%v (want true)", exists("a/b"), exists("a/x"))
	}
	del("a/x/3", "keep/4")
	if exists("a") || exists("keep") {
		t.Error("emptied directories a and keep remain")
	}
	if !exists("unrelated-empty") {
		t.Error("an empty directory no deleted key was in was removed")
	}
	del("unrelated-empty") // a directory is not an object: counts as deleted, stays
	if !exists("unrelated-empty") {
		t.Error("DeleteKeys of a directory's name removed the directory")
	}
	if fi, err := os.Stat(bucketDir); err != nil || !fi.IsDir() {
		t.Fatalf("the bucket directory itself is gone: %v", err)
	}
	if got := storetest.ListAll(t, f.s, ""); len(got) != 0 {
		t.Errorf("List = %q, want nothing", got)
	}
	f.untouched(t)
}

func TestDeleteBucketRemovesOnlyItsDirectory(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	storetest.PutAll(t, f.s, []string{"a/1", "b/c/2"})
	if err := f.s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "bucket")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bucket directory still there: %v", err)
	}
	f.untouched(t)
	// And Create brings back an empty bucket.
	if err := f.s.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storetest.ListAll(t, f.s, ""); len(got) != 0 {
		t.Errorf("List after re-Create = %q, want nothing", got)
	}
}

func TestCreateOverFile(t *testing.T) {
	f := newFixture(t)
	s, err := f.p.Open("bucket-file", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background()); err == nil {
		t.Error("Create over an existing file succeeded")
	}
	f.untouched(t)
}

func TestOpenValidatesBucketName(t *testing.T) {
	root := t.TempDir()
	p := local.New(root)
	for _, name := range []string{"../x", "..", "a/b", "UPPER", "ab", "a--b", "-ab", "ab-", "a_b", strings.Repeat("a", 64)} {
		if _, err := p.Open(name, nil); !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidBucketName", name, err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("Open created %d entries in the root", len(entries))
	}
}

// The generated secret is empty and every entry's etcd-backup gets hostPath, as
// provider-local writes them (keys.go).
func TestBackupSecretData(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	p := local.New("buckets")
	data, err := p.BackupSecretData(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 0 {
		t.Errorf("BackupSecretData = %q, want no keys (provider-local's generated secret is empty)", data)
	}
	want := filepath.Join(dir, "buckets")
	data, err = p.EntrySecretData(objectstore.Entry{})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || string(data[local.KeyHostPath]) != want {
		t.Errorf("EntrySecretData = %q, want only hostPath=%s", data, want)
	}
	if p.Type() != "local" {
		t.Errorf("Type = %q", p.Type())
	}
	p = local.New("buckets", local.WithHostPath("/var/lib/backups"))
	data, _ = p.EntrySecretData(objectstore.Entry{Region: "x", Source: true})
	if string(data[local.KeyHostPath]) != "/var/lib/backups" {
		t.Errorf("hostPath = %q, want the configured one", data[local.KeyHostPath])
	}
}

// --local-host-path is the hostPath of every etcd-backup; without it the root is.
func TestPluginHostPath(t *testing.T) {
	root := t.TempDir()
	build := func(args ...string) (objectstore.Provider, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		b := local.Plugin.Bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return b()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--local-root", root}, root},
		{[]string{"--local-root", root, "--local-host-path", "/etc/gardener/local-backupbuckets/"}, "/etc/gardener/local-backupbuckets"},
	} {
		p, err := build(c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := p.(*local.Provider).HostPath(); got != c.want {
			t.Errorf("%v: hostPath %q, want %q", c.args, got, c.want)
		}
	}
	if _, err := build("--local-root", root, "--local-host-path", "relative"); err == nil || !strings.Contains(err.Error(), "--local-host-path") {
		t.Errorf("a relative --local-host-path: %v, want an error naming the flag", err)
	}
}

// A bucket directory gets provider-local's mode 0775 whatever the umask, and gets it back
// when it was changed by hand.
func TestBucketDirectoryMode(t *testing.T) {
	root := t.TempDir()
	store, err := local.New(root).Open("modes", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, before := range []os.FileMode{0, 0o700} {
		if before != 0 {
			if err := os.Chmod(filepath.Join(root, "modes"), before); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Create(ctx); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(root, "modes"))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != local.BucketPerm {
			t.Errorf("bucket directory mode %o (was %o), want %o", got, before, local.BucketPerm)
		}
	}
}
