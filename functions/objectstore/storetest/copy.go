package storetest

import (
	"bytes"
	"crypto/md5"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// A store that copies server-side (objectstore.ServerSideCopier) copies objects of one part,
// of several and an empty one from another bucket of its server whole, reported as Stat
// reports them (an MD5, where reported, the content's); it refuses a key that holds an object
// and keeps that object; a missing source object is ErrObjectNotFound; the source is left as
// it was.
func testCopyFrom(t *testing.T, s objectstore.Store, cfg config) {
	c, ok := s.(objectstore.ServerSideCopier)
	if !ok {
		t.Skip("the store copies nothing server-side")
	}
	src := cfg.open(t, "conformance-copyfrom-source")
	mustCreate(t, s)
	mustCreate(t, src)
	objects := []struct {
		key  string
		seed byte
		size int64
	}{
		{"ns/copy/small", 21, 1000},
		{"ns/copy/empty", 22, 0},
		{"ns/copy/parts", 23, objectstore.UploadPartSize + 12345},
		{"ns/copy/taken", 24, 2000},
	}
	for _, o := range objects {
		if _, err := src.Upload(ctx(t), o.key, newPatternReader(o.seed, o.size)); err != nil {
			t.Fatalf("Upload %q: %v", o.key, err)
		}
	}
	if _, err := s.Upload(ctx(t), "ns/copy/taken", newPatternReader(99, 500)); err != nil {
		t.Fatal(err)
	}
	before := ListAll(t, src, "")

	for _, o := range objects {
		if o.key == "ns/copy/taken" {
			continue
		}
		info, err := c.CopyFrom(ctx(t), src, o.key)
		if err != nil {
			t.Fatalf("CopyFrom %q: %v", o.key, err)
		}
		h := md5.New()
		_, _ = io.Copy(h, newPatternReader(o.seed, o.size))
		if info.Key != o.key || info.Size != o.size || info.MD5 != nil && !bytes.Equal(info.MD5, h.Sum(nil)) {
			t.Errorf("CopyFrom %q reports %+v; want %d bytes and, if any, MD5 %x", o.key, info, o.size, h.Sum(nil))
		}
		if stat, err := s.Stat(ctx(t), o.key); err != nil || stat.Size != info.Size || !bytes.Equal(stat.MD5, info.MD5) {
			t.Errorf("Stat %q after the copy: %+v, %v; want what CopyFrom reported, %+v", o.key, stat, err, info)
		}
		sameContent(t, s, o.key, o.seed, o.size)
	}

	for _, key := range []string{"ns/copy/small", "ns/copy/taken"} {
		if _, err := c.CopyFrom(ctx(t), src, key); !errors.Is(err, objectstore.ErrObjectExists) {
			t.Errorf("CopyFrom onto %q, which holds an object: %v; want ErrObjectExists", key, err)
		}
	}
	sameContent(t, s, "ns/copy/taken", 99, 500)
	sameContent(t, s, "ns/copy/small", 21, 1000)

	if _, err := c.CopyFrom(ctx(t), src, "ns/copy/missing"); !errors.Is(err, objectstore.ErrObjectNotFound) {
		t.Errorf("CopyFrom of a missing object: %v; want ErrObjectNotFound", err)
	}
	if _, err := s.Stat(ctx(t), "ns/copy/missing"); !errors.Is(err, objectstore.ErrObjectNotFound) {
		t.Errorf("the copy of a missing object: Stat %v; want ErrObjectNotFound", err)
	}

	if after := ListAll(t, src, ""); !slices.Equal(after, before) {
		t.Errorf("the source after the copies holds %q, want %q", after, before)
	}
	sameContent(t, src, "ns/copy/parts", 23, objectstore.UploadPartSize+12345)
}

// sameContent reads key from s and compares it with the pattern of seed and size.
func sameContent(t *testing.T, s objectstore.Store, key string, seed byte, size int64) {
	t.Helper()
	rc, err := s.Open(ctx(t), key)
	if err != nil {
		t.Errorf("Open %q: %v", key, err)
		return
	}
	defer rc.Close()
	got, n, err := digest(rc)
	want, _, _ := digest(newPatternReader(seed, size))
	if err != nil || n != size || got != want {
		t.Errorf("%q reads back as %d bytes (%v), want %d bytes of its content", key, n, err, size)
	}
}
