package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// digest hashes what r yields, a read's worth at a time.
func digest(r io.Reader) (sum [sha256.Size]byte, n int64, err error) {
	h := sha256.New()
	n, err = io.Copy(h, r)
	copy(sum[:], h.Sum(nil))
	return sum, n, err
}

// Open reads back exactly what Upload wrote, for an object of several upload parts (compared by
// hash: neither side is held in memory) and for an empty one; a reader closed part-way is fine.
func testOpenReadsUpload(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	const key = "shoot--p--s--1/etcd-main/v2/Full-00000000-00000001-1"
	size := int64(objectstore.UploadPartSize + 12345) // two parts, the second short
	if _, err := s.Upload(ctx(t), key, newPatternReader(5, size)); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	want, _, _ := digest(newPatternReader(5, size))

	r, err := s.Open(ctx(t), key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got, n, err := digest(r)
	if err != nil {
		t.Fatalf("reading: %v after %d bytes", err, n)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n != size || got != want {
		t.Errorf("read %d bytes, sha256 %x; want %d bytes, sha256 %x", n, got, size, want)
	}

	// Read 1 KiB of it and stop: what a caller that only checks a snapshot's header does.
	r, err = s.Open(ctx(t), key)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	head := make([]byte, 1024)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatalf("reading the first KiB: %v", err)
	}
	wantHead := make([]byte, len(head))
	_, _ = io.ReadFull(newPatternReader(5, size), wantHead)
	if !bytes.Equal(head, wantHead) {
		t.Error("the first KiB read differs from the first KiB uploaded")
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close before the end: %v", err)
	}

	if _, err := s.Upload(ctx(t), "empty", newPatternReader(6, 0)); err != nil {
		t.Fatalf("Upload of an empty object: %v", err)
	}
	r, err = s.Open(ctx(t), "empty")
	if err != nil {
		t.Fatalf("Open of an empty object: %v", err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
		t.Errorf("reading an empty object: %d bytes, %v; want none", len(b), err)
	}
}

// Open of a key with no object — never written, deleted, a prefix of other keys — is
// ErrObjectNotFound; an invalid key is ErrInvalidKey.
func testOpenMissingKey(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	PutAll(t, s, []string{"e/1", "e/deleted"})
	if failed, err := s.DeleteKeys(ctx(t), []string{"e/deleted"}); err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
	}
	for _, key := range []string{"e/2", "e/deleted", "e", "e/1/x"} {
		r, err := s.Open(ctx(t), key)
		if err == nil {
			r.Close()
		}
		if !errors.Is(err, objectstore.ErrObjectNotFound) {
			t.Errorf("Open %q: %v, want ErrObjectNotFound", key, err)
		}
	}
	if _, err := s.Open(ctx(t), ""); !errors.Is(err, objectstore.ErrInvalidKey) {
		t.Errorf("Open of the empty key: %v, want ErrInvalidKey", err)
	}
}

func testOpenMissingBucket(t *testing.T, s objectstore.Store, _ config) {
	// Never created.
	r, err := s.Open(ctx(t), "k")
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("Open in a missing bucket: %v, want ErrBucketNotFound", err)
	}
}

// A context cancelled before Open fails it; one cancelled part-way through the read fails the
// read, with context.Canceled, before the object's end.
func testOpenCancelled(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	// Small enough for the connection's buffers to hold the rest: a reader that only failed once
	// the wire did would read it all, so the reader itself must heed ctx.
	size := int64(1 << 20)
	if _, err := s.Upload(ctx(t), "big", newPatternReader(7, size)); err != nil {
		t.Fatalf("Upload: %v", err)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if r, err := s.Open(cancelled, "big"); !errors.Is(err, context.Canceled) {
		if err == nil {
			r.Close()
		}
		t.Errorf("Open with a cancelled context: %v, want context.Canceled", err)
	}

	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	r, err := s.Open(c, "big")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, make([]byte, 1024)); err != nil {
		t.Fatalf("reading the first KiB: %v", err)
	}
	cancel()
	n, err := io.Copy(io.Discard, r)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("reading on after the context was cancelled: %d more bytes, %v; want context.Canceled", n, err)
	}
	if n >= size-1024 {
		t.Errorf("read to the end (%d more bytes) after the context was cancelled", n)
	}
}
