package gcs_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
)

// denyRewrites answers every rewrite with 403, as GCS does when the destination's
// credentials may not read the source bucket, and counts them.
type denyRewrites struct{ rewrites int }

func (d *denyRewrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/rewriteTo/") {
		d.rewrites++
		body := `{"error":{"code":403,"message":"denied","errors":[{"reason":"forbidden"}]}}`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// CopyFrom declines, writing nothing, an object with a custom time (provider-gcp's mark for
// deletion), a source at another endpoint, and a rewrite the server refuses.
func testCopyFrom(t *testing.T, sv server) {
	const key = "shoot--c--s--1/etcd-main/v2/Full-00000000-00000001-1"
	src := sv.open(t, sv.provider(t), "copy-source")
	if err := src.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutBytes(testCtx(t), src, key, []byte("a snapshot")); err != nil {
		t.Fatal(err)
	}
	nothingAt := func(dst objectstore.Store, what string) {
		t.Helper()
		if _, err := dst.Stat(testCtx(t), key); !errors.Is(err, objectstore.ErrObjectNotFound) {
			t.Errorf("%s: Stat %v; want nothing written", what, err)
		}
	}
	created := func(p objectstore.Provider, bucket string) objectstore.Store {
		t.Helper()
		s := sv.open(t, p, bucket)
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("Denied", func(t *testing.T) {
		deny := &denyRewrites{}
		dst := created(sv.provider(t, gcs.WithTransport(deny)), "copy-denied")
		_, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key)
		if !errors.Is(err, objectstore.ErrNotServerSide) || !errors.Is(err, objectstore.ErrUnauthorized) || deny.rewrites != 1 {
			t.Errorf("CopyFrom refused by the server (%d rewrites): %v; want ErrNotServerSide wrapping ErrUnauthorized", deny.rewrites, err)
		}
		nothingAt(dst, "denied")
	})
	t.Run("OtherEndpoint", func(t *testing.T) {
		p, err := gcs.New().Configure(endpointConfig(strings.Replace(sv.env.GCS.Endpoint, "127.0.0.1", "localhost", 1)))
		if err != nil {
			t.Fatal(err)
		}
		dst := created(p, "copy-other-endpoint")
		if _, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key); !errors.Is(err, objectstore.ErrNotServerSide) {
			t.Errorf("CopyFrom a bucket at another endpoint: %v; want ErrNotServerSide", err)
		}
		nothingAt(dst, "other endpoint")
	})
	t.Run("CustomTime", func(t *testing.T) {
		raw, err := storage.NewClient(testCtx(t), option.WithEndpoint(sv.env.GCS.Endpoint), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		const marked = "shoot--c--s--1/etcd-main/v2/Full-marked"
		if err := objectstore.PutBytes(testCtx(t), src, marked, []byte("marked for deletion")); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Bucket("copy-source").Object(marked).Update(testCtx(t), storage.ObjectAttrsToUpdate{CustomTime: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		dst := created(sv.provider(t), "copy-custom-time")
		_, err = dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, marked)
		if !errors.Is(err, objectstore.ErrObjectNotServerSide) {
			t.Errorf("CopyFrom of an object with a custom time: %v; want ErrObjectNotServerSide", err)
		}
		if _, err := dst.Stat(testCtx(t), marked); !errors.Is(err, objectstore.ErrObjectNotFound) {
			t.Errorf("Stat %v; want nothing written", err)
		}
	})
}
