package storetest

import (
	"errors"
	"io"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// RunResume checks that a read whose connection breaks mid-way resumes: the object comes back
// whole, or, if it was replaced in between, the read fails with ErrObjectChanged having yielded
// the old object's start only. direct and cut are stores of one bucket, which must not exist
// yet; cut's client goes through p.
func RunResume(t *testing.T, direct, cut objectstore.Store, p *CutProxy) {
	mustCreate(t, direct)
	size := int64(objectstore.UploadPartSize + 4567) // two parts: a multipart upload's ETag
	const breakAt = 1 << 20
	upload := func(t *testing.T, key string, seed byte) error {
		_, err := direct.Upload(ctx(t), key, newPatternReader(seed, size))
		return err
	}

	t.Run("Whole", func(t *testing.T) {
		const key = "resume-whole"
		if err := upload(t, key, 8); err != nil {
			t.Fatalf("Upload: %v", err)
		}
		p.Cut("/"+key, 1, breakAt, nil)
		r, err := cut.Open(ctx(t), key)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer r.Close()
		got, n, err := digest(r)
		want, _, _ := digest(newPatternReader(8, size))
		if err != nil || n != size || got != want {
			t.Errorf("read through a broken connection: %d bytes, sha256 %x, %v; want %d bytes, sha256 %x", n, got, err, size, want)
		}
		if gets := p.GETs("/" + key); gets < 2 {
			t.Errorf("%d GETs; want the broken one and one resuming it at least", gets)
		}
	})

	t.Run("Replaced", func(t *testing.T) {
		const key = "resume-replaced"
		if err := upload(t, key, 9); err != nil {
			t.Fatalf("Upload: %v", err)
		}
		// Of the same size: only the object's identity tells the two apart.
		p.Cut("/"+key, 1, breakAt, func() {
			if err := upload(t, key, 10); err != nil {
				t.Errorf("replacing the object after the break: %v", err)
			}
		})
		r, err := cut.Open(ctx(t), key)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer r.Close()
		got, n, err := digest(r)
		if !errors.Is(err, objectstore.ErrObjectChanged) {
			t.Errorf("reading an object replaced after the break: %v after %d bytes; want ErrObjectChanged", err, n)
		} else {
			t.Logf("read error: %v", err)
		}
		if want, _, _ := digest(io.LimitReader(newPatternReader(9, size), n)); got != want || n >= size {
			t.Errorf("the %d bytes read are not the start of the object Open found", n)
		}
	})
}
