package storetest

import (
	"bytes"
	"crypto/md5"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// patternReader yields n pseudo-random bytes (seeded), never holding more than one read's worth.
type patternReader struct {
	rng *rand.ChaCha8
	n   int64
}

func newPatternReader(seed byte, n int64) *patternReader {
	var s [32]byte
	s[0] = seed
	return &patternReader{rng: rand.NewChaCha8(s), n: n}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n)]
	_, _ = p.rng.Read(b)
	p.n -= int64(len(b))
	return len(b), nil
}

// failingReader fails after n bytes.
type failingReader struct{ r io.Reader }

var errBodyFailed = errors.New("body failed")

func (f failingReader) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if err == io.EOF {
		return n, errBodyFailed
	}
	return n, err
}

// Upload streams a body of several parts, Stat reports its size, a second upload replaces it,
// and a missing key is ErrObjectNotFound.
func testUploadStreams(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	size := int64(2*objectstore.UploadPartSize + 12345)
	n, err := s.Upload(ctx(t), "ns/config/20260102T030405Z.db", newPatternReader(1, size))
	if err != nil || n != size {
		t.Fatalf("Upload: %d bytes, %v; want %d", n, err, size)
	}
	info, err := s.Stat(ctx(t), "ns/config/20260102T030405Z.db")
	if err != nil || info.Size != size {
		t.Fatalf("Stat: %+v, %v; want size %d", info, err, size)
	}
	if _, err := s.Upload(ctx(t), "ns/config/20260102T030405Z.db", newPatternReader(2, 10)); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Stat(ctx(t), "ns/config/20260102T030405Z.db"); err != nil || info.Size != 10 {
		t.Fatalf("Stat after replacing: %+v, %v; want size 10", info, err)
	}
	if _, err := s.Upload(ctx(t), "ns/config/empty", newPatternReader(3, 0)); err != nil {
		t.Fatalf("empty body: %v", err)
	}
	if info, err := s.Stat(ctx(t), "ns/config/empty"); err != nil || info.Size != 0 {
		t.Fatalf("Stat of an empty object: %+v, %v", info, err)
	}
	if _, err := s.Stat(ctx(t), "ns/config/missing"); !errors.Is(err, objectstore.ErrObjectNotFound) {
		t.Fatalf("Stat of a missing key: %v, want ErrObjectNotFound", err)
	}
	equal(t, "keys", ListAll(t, s, "ns/"), []string{"ns/config/20260102T030405Z.db", "ns/config/empty"})
}

// A body that fails part-way leaves no object (and no visible part of one) behind.
func testUploadFailureLeavesNothing(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	_, err := s.Upload(ctx(t), "ns/config/broken.db", failingReader{newPatternReader(4, objectstore.UploadPartSize+1)})
	if err == nil {
		t.Fatal("Upload of a failing body succeeded")
	}
	if _, err := s.Stat(ctx(t), "ns/config/broken.db"); !errors.Is(err, objectstore.ErrObjectNotFound) {
		t.Fatalf("Stat after a failed upload: %v, want ErrObjectNotFound", err)
	}
	if keys := ListAll(t, s, ""); len(keys) != 0 {
		t.Fatalf("a failed upload left %q", keys)
	}
}

// Stat's MD5, where a provider reports one, is the MD5 of the content Upload wrote: for an
// object of one part, one of several parts, an empty one and one replaced (the old MD5 gone).
// A provider may report none (nil); it must never report another digest (a multipart ETag) as
// the MD5.
func testStatMD5(t *testing.T, s objectstore.Store, _ config) {
	mustCreate(t, s)
	for _, o := range []struct {
		key  string
		seed byte
		size int64
	}{
		{"ns/md5/small", 11, 1000},
		{"ns/md5/empty", 12, 0},
		{"ns/md5/parts", 13, objectstore.UploadPartSize + 12345},
		{"ns/md5/replaced", 14, 2000},
		{"ns/md5/replaced", 15, 3000},
	} {
		if _, err := s.Upload(ctx(t), o.key, newPatternReader(o.seed, o.size)); err != nil {
			t.Fatalf("Upload %q: %v", o.key, err)
		}
		h := md5.New()
		_, _ = io.Copy(h, newPatternReader(o.seed, o.size))
		info, err := s.Stat(ctx(t), o.key)
		if err != nil {
			t.Fatalf("Stat %q: %v", o.key, err)
		}
		switch {
		case info.Size != o.size:
			t.Errorf("Stat %q: size %d, want %d", o.key, info.Size, o.size)
		case info.MD5 == nil:
			t.Logf("%q (%d bytes): no MD5 reported", o.key, o.size)
		case !bytes.Equal(info.MD5, h.Sum(nil)):
			t.Errorf("Stat %q (%d bytes): MD5 %x, but the content's is %x", o.key, o.size, info.MD5, h.Sum(nil))
		default:
			t.Logf("%q (%d bytes): MD5 reported and right", o.key, o.size)
		}
	}
}
