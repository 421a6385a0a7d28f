package drill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// objects is a Source of objects in memory.
type objects map[string][]byte

func (o objects) List(_ context.Context, prefix string, fn func([]string) error) error {
	var keys []string
	for k := range o {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return fn(keys)
}

func (o objects) Open(_ context.Context, key string) (io.ReadCloser, error) {
	data, ok := o[key]
	if !ok {
		return nil, errors.New("no such object")
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// A Keeper keeps an object whole where the drill stopped reading it early (as a zlib stream's
// reader stops at its checksum), only the objects the drill proved, and the drill's result
// beside them; it keeps nothing of a drill that failed, and refuses a directory that holds the
// set already.
func TestKeeper(t *testing.T) {
	ctx := context.Background()
	const prefix = "shoot--a--b--0b6f5a1e/etcd-main/"
	full, delta, other := prefix+"v2/Full-00000000-00000010-1700000000.zlib", prefix+"v2/Incr-00000011-00000012-1700000060", prefix+"v2/Incr-00000013-00000014-1700000120"
	src := objects{full: bytes.Repeat([]byte("full"), 5000), delta: []byte("delta"), other: []byte("other")}
	dir := t.TempDir()

	k, err := NewKeeper(dir, "bucket", prefix)
	if err != nil {
		t.Fatal(err)
	}
	keeping := k.Source(src)
	for key, n := range map[string]int{full: 100, delta: -1, other: -1} {
		rc, err := keeping.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if n < 0 {
			_, err = io.ReadAll(rc)
		} else {
			_, err = io.ReadFull(rc, make([]byte, n))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := k.Keep(Result{Full: full, Deltas: []string{delta}}, nil, func(k Kept) ([]byte, error) {
		return []byte(k.BackupDataPath + "\n"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dataPath := filepath.Join(dir, "bucket", "shoot--a--b--0b6f5a1e", "etcd-main", "v2")
	if kept.BackupDataPath != dataPath || len(kept.Objects) != 2 {
		t.Fatalf("kept %+v, want 2 objects at %s", kept, dataPath)
	}
	for i, key := range []string{full, delta} {
		got, err := os.ReadFile(filepath.Join(dir, "bucket", filepath.FromSlash(key)))
		if err != nil || !bytes.Equal(got, src[key]) {
			t.Errorf("kept %s: %d bytes (%v), want the %d stored", key, len(got), err, len(src[key]))
		}
		sum := sha256.Sum256(src[key])
		if o := kept.Objects[i]; o.Key != key || o.Size != int64(len(src[key])) || o.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("kept object %d: %+v, want %s, %d bytes, its SHA-256", i, o, key, len(src[key]))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bucket", filepath.FromSlash(other))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kept %s, which the drill did not prove (%v)", other, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "shoot--a--b--0b6f5a1e.drill.json")); err != nil || string(got) != dataPath+"\n" {
		t.Errorf("the result beside the set: %q (%v)", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the keep directory holds %v, want the bucket and the result only", entries)
	}

	if _, err := NewKeeper(dir, "bucket", prefix); !errors.Is(err, ErrKeptSetExists) {
		t.Errorf("a second keeper of the set: %v, want ErrKeptSetExists", err)
	}

	failed := t.TempDir()
	k, err = NewKeeper(failed, "bucket", prefix)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := k.Source(src).Open(ctx, full)
	_, _ = io.ReadAll(rc)
	_ = rc.Close()
	res := Result{Full: full}
	if _, err := k.Keep(res, full0Fail(res), nil); !errors.Is(err, ErrNothingKept) {
		t.Errorf("keeping a failed drill: %v, want ErrNothingKept", err)
	}
	if entries, _ := os.ReadDir(failed); len(entries) != 0 {
		t.Errorf("a failed drill left %v in the keep directory", entries)
	}

	for _, tc := range []struct{ bucket, prefix string }{
		{"bucket", "shoot--a--b--0b6f5a1e/etcd-events/"},
		{"bucket", "a/b/etcd-main/"},
		{"a/b", prefix},
		{"..", prefix},
	} {
		if _, err := NewKeeper(t.TempDir(), tc.bucket, tc.prefix); err == nil {
			t.Errorf("NewKeeper(bucket %q, prefix %q) keeps, want an error", tc.bucket, tc.prefix)
		}
	}
}

// full0Fail is a drill of res that found its full snapshot corrupt.
func full0Fail(res Result) error {
	s, _ := ParseSnapshot(res.Full)
	return s.fail(ErrCorrupt, nil, "restoring its snapshot db")
}
