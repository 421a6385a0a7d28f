package swift_test

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

// refuseCopies answers every server-side copy (a PUT with X-Copy-From) with status.
type refuseCopies struct{ status int }

func (r refuseCopies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Header.Get("X-Copy-From") != "" {
		return &http.Response{StatusCode: r.status, Status: fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	}
	return http.DefaultTransport.RoundTrip(req)
}

// CopyFrom copies a dynamic large object as its content, one object with the MD5 of it; it
// declines an object the proxy finds too large (413) alone, and a copy it refuses (403) for
// the pair; neither writes anything.
func testCopyFrom(t *testing.T, creds map[string][]byte) {
	src := open(t, swift.New(), "copy-source", creds)
	if err := src.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var whole []byte
	for i := range 3 {
		seg := bytes.Repeat([]byte{byte('a' + i)}, 1<<20+i)
		whole = append(whole, seg...)
		if err := objectstore.PutBytes(testCtx(t), src, fmt.Sprintf("dlo/snap/chunk_%02d", i), seg); err != nil {
			t.Fatal(err)
		}
	}
	c, err := swift.ObjectStorage(testCtx(t), src)
	if err != nil {
		t.Fatal(err)
	}
	manifest := objects.CreateOpts{Content: strings.NewReader(""), ObjectManifest: "copy-source/dlo/snap/chunk_"}
	if _, err := objects.Create(testCtx(t), c, "copy-source", "dlo/snap", manifest).Extract(); err != nil {
		t.Fatal(err)
	}
	created := func(p objectstore.Provider, bucket string) objectstore.Store {
		t.Helper()
		s := open(t, p, bucket, creds)
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("DynamicLargeObject", func(t *testing.T) {
		dst := created(swift.New(), "copy-dlo")
		info, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, "dlo/snap")
		sum := md5.Sum(whole)
		if err != nil || info.Size != int64(len(whole)) || !bytes.Equal(info.MD5, sum[:]) {
			t.Fatalf("CopyFrom of a manifest: %+v, %v; want one object of %d bytes with their MD5", info, err, len(whole))
		}
		r, err := dst.Open(testCtx(t), "dlo/snap")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, whole) {
			t.Errorf("the copy reads %d bytes, %v; want the manifest's content", len(got), err)
		}
	})
	for _, tc := range []struct {
		status int
		want   error
	}{
		{http.StatusRequestEntityTooLarge, objectstore.ErrObjectNotServerSide},
		{http.StatusForbidden, objectstore.ErrNotServerSide},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			dst := created(swift.New(swift.WithTransport(refuseCopies{tc.status})), fmt.Sprintf("copy-refused-%d", tc.status))
			if _, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, "dlo/snap"); !errors.Is(err, tc.want) {
				t.Errorf("CopyFrom answered %d: %v; want %v", tc.status, err, tc.want)
			}
			if _, err := dst.Stat(testCtx(t), "dlo/snap"); !errors.Is(err, objectstore.ErrObjectNotFound) {
				t.Errorf("Stat %v; want nothing written", err)
			}
		})
	}
}
