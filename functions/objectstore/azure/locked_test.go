package azure_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
)

// Azurite enforces no immutability policy (its immutability calls answer NotImplemented), so
// what Azure answers a batch delete of blobs a policy keeps is served here, in Azure's
// multipart format: each locked blob's sub-response is 409 BlobImmutableDueToPolicy. The
// store must report those keys as ErrObjectLocked (which a purge marks) and the others as
// deleted.
func TestBatchDeleteReportsImmutableBlobsAsLocked(t *testing.T) {
	locked := map[string]bool{"shoot--a/etcd-main/v2/Full-1": true, "shoot--a/etcd-main/v2/Incr-3": true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("comp") != "batch" {
			http.Error(w, "only batches here", http.StatusBadRequest)
			return
		}
		const boundary = "batchresponse_test"
		w.Header().Set("Content-Type", "multipart/mixed; boundary="+boundary)
		w.WriteHeader(http.StatusAccepted)
		id := ""
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if v, ok := strings.CutPrefix(line, "Content-ID:"); ok {
				id = strings.TrimSpace(v)
			}
			target, ok := strings.CutPrefix(line, "DELETE ")
			if !ok {
				continue
			}
			blob := strings.SplitN(strings.Fields(target)[0], "?", 2)[0]
			blob, err := url.PathUnescape(strings.TrimPrefix(blob, "/devstoreaccount1/bucket-1/"))
			if err != nil {
				t.Error(err)
			}
			status := "HTTP/1.1 202 Accepted\r\nx-ms-delete-type-permanent: true\r\n\r\n"
			if locked[blob] {
				body := `<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobImmutableDueToPolicy</Code><Message>This operation is not permitted as the blob is immutable due to a policy.</Message></Error>`
				status = fmt.Sprintf("HTTP/1.1 409 This operation is not permitted as the blob is immutable due to a policy.\r\nx-ms-error-code: BlobImmutableDueToPolicy\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s\r\n", len(body), body)
			}
			fmt.Fprintf(w, "--%s\r\nContent-Type: application/http\r\nContent-ID: %s\r\n\r\n%s", boundary, id, status)
		}
		fmt.Fprintf(w, "--%s--\r\n", boundary)
	}))
	defer srv.Close()

	store, err := azure.New().Open("bucket-1", map[string][]byte{
		azure.KeyStorageAccount: []byte("devstoreaccount1"), azure.KeyStorageKey: []byte(testKey), azure.KeyEndpoint: []byte(srv.URL + "/devstoreaccount1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"shoot--a/etcd-main/v2/Full-1", "shoot--a/etcd-main/v2/Incr-2", "shoot--a/etcd-main/v2/Incr-3", "shoot--a/etcd-main/v2/Incr-4"}
	failed, err := store.DeleteKeys(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != len(locked) {
		t.Fatalf("failed keys %v: want exactly the locked ones %v", failed, locked)
	}
	for k, err := range failed {
		if !locked[k] || !errors.Is(err, objectstore.ErrObjectLocked) || !strings.Contains(err.Error(), "BlobImmutableDueToPolicy") {
			t.Fatalf("key %s failed with %v: want ErrObjectLocked naming BlobImmutableDueToPolicy, for locked keys only", k, err)
		}
	}
}
