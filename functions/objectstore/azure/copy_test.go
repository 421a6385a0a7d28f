package azure_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// The second storage account Azurite serves, to copy across accounts (development values).
var (
	secondAccount = "copysecond"
	secondKey     = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("housekeeper copy second account ", 2)))
)

// copyStatus rewrites what Azurite, which copies at once, answers about a blob copy: the
// x-ms-copy-status of the Copy Blob answer (start) and of the blob's properties read
// afterwards (then), as a copy that takes a while, fails, or never ends would have them.
// Azurite's own answer "" leaves a header as it is. It counts the properties read.
type copyStatus struct {
	start, then string
	polls       atomic.Int32
	refuse      string // an error code answered to Copy Blob instead of copying
}

func (c *copyStatus) RoundTrip(r *http.Request) (*http.Response, error) {
	copying := r.Method == http.MethodPut && hasHeader(r.Header, "x-ms-copy-source")
	if copying && c.refuse != "" {
		body := `<?xml version="1.0" encoding="utf-8"?><Error><Code>` + c.refuse + `</Code><Message>refused</Message></Error>`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}, "X-Ms-Error-Code": {c.refuse}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	switch {
	case copying && c.start != "":
		resp.Header.Set("X-Ms-Copy-Status", c.start)
	case r.Method == http.MethodHead && resp.Header.Get("X-Ms-Copy-Status") != "":
		c.polls.Add(1) // the final Stat too
		if c.then != "" {
			resp.Header.Set("X-Ms-Copy-Status", c.then)
		}
	}
	return resp, nil
}

// hasHeader reports whether h has name, which the SDK may set in lower case.
func hasHeader(h http.Header, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// CopyFrom from a container of another storage account (a SAS of the source blob) copies the
// content and its MD5, not the source's deletion mark, and quotes no SAS; a copy still pending
// is polled until done; one that fails, or is pending when the context ends, leaves no blob;
// a source the service cannot read (CannotVerifyCopySource) is ErrNotServerSide.
func testCopyFrom(t *testing.T, az azurite) {
	const key = "shoot--c--s--1/etcd-main/v2/Full-00000000-00000001-1"
	second := map[string][]byte{
		azure.KeyStorageAccount: []byte(secondAccount),
		azure.KeyStorageKey:     []byte(secondKey),
		azure.KeyEndpoint:       []byte(strings.Replace(az.endpoint, stack.AzuriteAccount, secondAccount, 1)),
	}
	src, err := azure.New().Open("copy-source", second)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	content := []byte("a snapshot in another account")
	if err := objectstore.PutBytes(testCtx(t), src, key, content); err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.(objectstore.Locking).Mark(testCtx(t), []string{key}); err != nil {
		t.Fatal(err)
	}
	want, err := src.Stat(testCtx(t), key)
	if err != nil || want.MD5 == nil {
		t.Fatalf("the source: %+v, %v; want an MD5", want, err)
	}
	open := func(t *testing.T, bucket string, rt http.RoundTripper) objectstore.ServerSideCopier {
		t.Helper()
		p := azure.New(azure.WithPollFrequency(10 * time.Millisecond))
		if rt != nil {
			p = azure.New(azure.WithPollFrequency(10*time.Millisecond), azure.WithHTTPClient(&http.Client{Transport: rt}))
		}
		s := az.open(t, p, bucket)
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		return s.(objectstore.ServerSideCopier)
	}
	nothingAt := func(t *testing.T, dst objectstore.ServerSideCopier) {
		t.Helper()
		if _, err := dst.(objectstore.Store).Stat(testCtx(t), key); !errors.Is(err, objectstore.ErrObjectNotFound) {
			t.Errorf("Stat %v; want nothing left", err)
		}
	}

	t.Run("OtherAccount", func(t *testing.T) {
		dst := open(t, "copy-other-account", nil)
		got, err := dst.CopyFrom(testCtx(t), src, key)
		if err != nil || got.Size != want.Size || string(got.MD5) != string(want.MD5) {
			t.Fatalf("CopyFrom another account: %+v, %v; want %+v", got, err, want)
		}
		if marked, err := dst.(objectstore.Locking).Marked(testCtx(t), key); err != nil || marked {
			t.Errorf("the copy of a marked blob: Marked %v, %v; want false, the mark is the source's", marked, err)
		}
		_, err = dst.CopyFrom(testCtx(t), src, key)
		if !errors.Is(err, objectstore.ErrObjectExists) || strings.Contains(err.Error(), "sig=") {
			t.Errorf("CopyFrom again: %v; want ErrObjectExists, no SAS quoted", err)
		}
	})
	t.Run("Pending", func(t *testing.T) {
		rt := &copyStatus{start: "pending"}
		dst := open(t, "copy-pending", rt)
		if got, err := dst.CopyFrom(testCtx(t), src, key); err != nil || got.Size != want.Size {
			t.Fatalf("CopyFrom answered pending: %+v, %v", got, err)
		}
		if n := rt.polls.Load(); n < 2 {
			t.Errorf("%d properties read; want a poll of the pending copy and the final Stat", n)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		dst := open(t, "copy-failed", &copyStatus{start: "pending", then: "failed"})
		if _, err := dst.CopyFrom(testCtx(t), src, key); err == nil || !strings.Contains(err.Error(), "failed") || strings.Contains(err.Error(), "sig=") {
			t.Errorf("CopyFrom of a copy that fails: %v; want the failure, no SAS quoted", err)
		}
		nothingAt(t, dst)
	})
	t.Run("NeverEnds", func(t *testing.T) {
		dst := open(t, "copy-never-ends", &copyStatus{start: "pending", then: "pending"})
		ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
		defer cancel()
		if _, err := dst.CopyFrom(ctx, src, key); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("CopyFrom pending past the context: %v; want DeadlineExceeded", err)
		}
		nothingAt(t, dst)
	})
	t.Run("CannotVerifyCopySource", func(t *testing.T) {
		dst := open(t, "copy-cannot-verify", &copyStatus{refuse: "CannotVerifyCopySource"})
		if _, err := dst.CopyFrom(testCtx(t), src, key); !errors.Is(err, objectstore.ErrNotServerSide) {
			t.Errorf("CopyFrom refused by the service: %v; want ErrNotServerSide", err)
		}
		nothingAt(t, dst)
	})
}
