package s3_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

// denyCopies answers every CopyObject with 403 AccessDenied, as S3 does when the destination's
// credentials may not read the source bucket, and counts them.
type denyCopies struct{ copies int }

func (d *denyCopies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "" {
		d.copies++
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// CopyFrom into a bucket with object lock: the copy carries none of the source's tags (its
// deletion mark) and the destination's default retention locks it. It declines, writing
// nothing, an object above the size one CopyObject copies, a source at another endpoint or of
// another provider, and a copy the server refuses (access denied).
func testCopyFrom(t *testing.T, sv server) {
	const key = "shoot--c--s--1/etcd-main/v2/Full-00000000-00000001-1"
	src := sv.open(t, s3.New(), "copy-source")
	if err := src.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutBytes(testCtx(t), src, key, []byte("a snapshot")); err != nil {
		t.Fatal(err)
	}
	raw := sv.rawClient()
	_, err := raw.PutObjectTagging(testCtx(t), &awss3.PutObjectTaggingInput{Bucket: aws.String("copy-source"), Key: aws.String(key),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String(s3.MarkTag), Value: aws.String(s3.MarkValue)}}}})
	if err != nil {
		t.Fatal(err)
	}
	nothingAt := func(dst objectstore.Store, what string) {
		t.Helper()
		if _, err := dst.Stat(testCtx(t), key); !errors.Is(err, objectstore.ErrObjectNotFound) {
			t.Errorf("%s: Stat %v; want nothing written", what, err)
		}
	}

	t.Run("Immutable", func(t *testing.T) {
		dst := sv.open(t, s3.New(), "copy-immutable")
		if _, err := dst.(objectstore.Configurable).CreateWithConfig(testCtx(t), immutability("24h", "governance")); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key); err != nil {
			t.Fatalf("CopyFrom: %v", err)
		}
		if marked, err := dst.(objectstore.Locking).Marked(testCtx(t), key); err != nil || marked {
			t.Errorf("the copy of a marked object: Marked %v, %v; want false, the mark is the source's", marked, err)
		}
		if failed, err := dst.DeleteKeys(testCtx(t), []string{key}); err != nil || !errors.Is(failed[key], objectstore.ErrObjectLocked) {
			t.Errorf("deleting the copy: failed %v, err %v; want it locked by the destination's default retention", failed, err)
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		s3.SetMaxCopySize(t, 5)
		dst := sv.open(t, s3.New(), "copy-too-large")
		if err := dst.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		_, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key)
		if !errors.Is(err, objectstore.ErrObjectNotServerSide) || !errors.Is(err, objectstore.ErrNotServerSide) {
			t.Errorf("CopyFrom of an object above the limit: %v; want ErrObjectNotServerSide", err)
		}
		nothingAt(dst, "too large")
	})
	t.Run("OtherEndpoint", func(t *testing.T) {
		// The same server under another name: S3 cannot tell, so CopyFrom does not ask.
		creds := with(sv.creds, s3.KeyEndpoint, strings.Replace(sv.endpoint, "127.0.0.1", "localhost", 1))
		dst, err := s3.New().Open("copy-other-endpoint", creds)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key); !errors.Is(err, objectstore.ErrNotServerSide) {
			t.Errorf("CopyFrom a bucket at another endpoint: %v; want ErrNotServerSide", err)
		}
		nothingAt(dst, "other endpoint")
	})
	t.Run("OtherProvider", func(t *testing.T) {
		other, err := local.New(t.TempDir()).Open("local", nil)
		if err != nil {
			t.Fatal(err)
		}
		dst := sv.open(t, s3.New(), "copy-source")
		if _, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), other, key); !errors.Is(err, objectstore.ErrNotServerSide) {
			t.Errorf("CopyFrom a local bucket: %v; want ErrNotServerSide", err)
		}
	})
	t.Run("Denied", func(t *testing.T) {
		deny := &denyCopies{}
		dst := sv.open(t, s3.New(s3.WithHTTPClient(&http.Client{Transport: deny})), "copy-denied")
		if err := dst.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		_, err := dst.(objectstore.ServerSideCopier).CopyFrom(testCtx(t), src, key)
		if !errors.Is(err, objectstore.ErrNotServerSide) || !errors.Is(err, objectstore.ErrUnauthorized) || deny.copies != 1 {
			t.Errorf("CopyFrom refused by the server (%d CopyObject): %v; want ErrNotServerSide wrapping ErrUnauthorized", deny.copies, err)
		}
		nothingAt(dst, "denied")
	})
}
