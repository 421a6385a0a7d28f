package azure_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// counter is an http.RoundTripper that counts requests and Blob Batch requests, and how many
// batches were in flight at once.
type counter struct {
	mu                   sync.Mutex
	requests, batches    int
	inFlight, maxInFlght int
}

// RoundTrip counts the requests the server answered: one the transport failed to deliver
// (Azurite closing an idle keep-alive connection as it is reused) and the SDK sent again is one
// request, not two.
func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	isBatch := r.URL.Query().Get("comp") == "batch"
	if isBatch {
		c.mu.Lock()
		c.inFlight++
		c.maxInFlght = max(c.maxInFlght, c.inFlight)
		c.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if isBatch {
		c.inFlight--
	}
	if err == nil {
		c.requests++
		if isBatch {
			c.batches++
		}
	}
	return resp, err
}

func (c *counter) counts() (requests, batches, maxInFlight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, c.batches, c.maxInFlght
}

func (c *counter) client() *http.Client { return &http.Client{Transport: c} }

type azurite struct {
	endpoint string
	creds    map[string][]byte
}

// open opens bucket with p and the emulator's account.
func (a azurite) open(t *testing.T, p *azure.Provider, bucket string) objectstore.Store {
	t.Helper()
	s, err := p.Open(bucket, a.creds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// containerClient is a plain SDK client, to arrange what the store cannot (leases, snapshots).
func (a azurite) containerClient(t *testing.T, bucket string) *container.Client {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(a.endpoint+"/"+bucket, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// One Azurite serves every test here: starting it costs more than most tests.
func TestAzurite(t *testing.T) {
	env := testenv.Start(t, testenv.WithAzuriteAccounts(secondAccount+":"+secondKey))
	az := azurite{
		endpoint: env.Azurite.Endpoint,
		creds: map[string][]byte{
			azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
			azure.KeyStorageKey:     []byte(stack.AzuriteKey),
			azure.KeyEndpoint:       []byte(env.Azurite.Endpoint),
		},
	}

	t.Run("Conformance", func(t *testing.T) {
		// Small pages and batches, so paging and batch splitting happen with few blobs.
		p := azure.New(azure.WithListPageSize(7), azure.WithBatchSize(5))
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return az.open(t, p, bucket)
		}, storetest.WithPageSize(7))
	})
	t.Run("OpenResumes", func(t *testing.T) {
		u, err := url.Parse(az.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		proxy := storetest.NewCutProxy(t, u.Host)
		cut := azure.New(azure.WithHTTPClient(&http.Client{Transport: proxy.Transport()}))
		storetest.RunResume(t, az.open(t, azure.New(), "open-resumes"), az.open(t, cut, "open-resumes"), proxy)
	})
	t.Run("CreateTwice", func(t *testing.T) { testCreateTwice(t, az) })
	t.Run("WrongKey", func(t *testing.T) { testWrongKey(t, az) })
	t.Run("InvalidContainerNameSendsNothing", func(t *testing.T) { testInvalidNameSendsNothing(t, az) })
	t.Run("DeleteKeys600", func(t *testing.T) { testDeleteKeys600(t, az) })
	t.Run("FailedSubRequest", func(t *testing.T) { testFailedSubRequest(t, az) })
	t.Run("Snapshots", func(t *testing.T) { testSnapshots(t, az) })
	t.Run("MissingContainer", func(t *testing.T) { testMissingContainer(t, az) })
	t.Run("CopyFrom", func(t *testing.T) { testCopyFrom(t, az) })
}

func testCreateTwice(t *testing.T, az azurite) {
	s := az.open(t, azure.New(), "create-twice")
	for i := range 2 {
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatalf("Create #%d: %v", i+1, err)
		}
	}
}

func testWrongKey(t *testing.T, az azurite) {
	good := az.open(t, azure.New(), "wrong-key")
	if err := good.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutBytes(testCtx(t), good, "k/1", []byte("v")); err != nil {
		t.Fatal(err)
	}

	wrongKey := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the key ", 5)))
	creds := map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(wrongKey),
		azure.KeyEndpoint:       []byte(az.endpoint),
	}
	s, err := azure.New().Open("wrong-key", creds)
	if err != nil {
		t.Fatal(err)
	}
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, objectstore.ErrUnauthenticated) || errors.Is(err, objectstore.ErrUnauthorized) {
			t.Errorf("%s with a wrong key: %v, want ErrUnauthenticated only", op, err)
		}
		if err != nil && (strings.Contains(err.Error(), wrongKey) || strings.Contains(err.Error(), stack.AzuriteKey)) {
			t.Errorf("%s: the error quotes a key: %v", op, err)
		}
	}
	check("Create", s.Create(testCtx(t)))
	check("List", s.List(testCtx(t), "", func([]string) error { return nil }))
	check("Upload", objectstore.PutBytes(testCtx(t), s, "k/2", []byte("v")))
	check("Delete", s.Delete(testCtx(t)))
	failed, err := s.DeleteKeys(testCtx(t), []string{"k/1"})
	check("DeleteKeys", err)
	if failed != nil {
		t.Errorf("DeleteKeys failed as a whole but also returned failed=%v", failed)
	}
	if got := storetest.ListAll(t, good, ""); !slices.Equal(got, []string{"k/1"}) {
		t.Errorf("after calls with a wrong key the container holds %q, want it untouched", got)
	}
}

func testInvalidNameSendsNothing(t *testing.T, az azurite) {
	var c counter
	p := azure.New(azure.WithHTTPClient(c.client()))
	for _, name := range []string{"Invalid_Name", "a--b", "ab"} {
		if _, err := p.Open(name, az.creds); !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidBucketName", name, err)
		}
	}
	missing := map[string][]byte{azure.KeyStorageAccount: []byte(stack.AzuriteAccount), azure.KeyEndpoint: []byte(az.endpoint)}
	_, err := p.Open("valid-name", missing)
	if !errors.Is(err, objectstore.ErrMissingCredentials) || !strings.Contains(err.Error(), azure.KeyStorageKey) {
		t.Errorf("Open without storageKey = %v, want ErrMissingCredentials naming it", err)
	}
	if err != nil && (strings.Contains(err.Error(), stack.AzuriteAccount) || strings.Contains(err.Error(), az.endpoint)) {
		t.Errorf("the error quotes a credential value: %v", err)
	}
	if n, _, _ := c.counts(); n != 0 {
		t.Errorf("%d requests were sent; invalid input must fail before any", n)
	}
}

func testDeleteKeys600(t *testing.T, az azurite) {
	var c counter
	p := azure.New(azure.WithHTTPClient(c.client()), azure.WithBatchConcurrency(2))
	s := az.open(t, p, "purge-600")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var inside, outside []string
	for i := range 560 {
		inside = append(inside, fmt.Sprintf("shoot--p--s--1/etcd-%s/v2/Full-%08d-%08d-%d", []string{"main", "events"}[i%2], i, i+1, 1700000000+i))
	}
	for i := range 20 {
		outside = append(outside, fmt.Sprintf("shoot--p--s--10/etcd-main/v2/Full-%08d", i))
	}
	storetest.PutAll(t, s, append(slices.Clone(inside), outside...))

	// The real page size holds everything in one page.
	if pages := storetest.ListPages(t, s, ""); len(pages) != 1 || len(pages[0]) != 580 {
		t.Errorf("List gave %d pages, want one of 580 keys", len(pages))
	}
	keys := storetest.ListAll(t, s, "shoot--p--s--1/")
	if len(keys) != 560 {
		t.Fatalf("listed %d keys under the prefix, want 560", len(keys))
	}
	for i := range 40 { // keys that never existed count as deleted
		keys = append(keys, fmt.Sprintf("shoot--p--s--1/etcd-main/v2/gone-%02d", i))
	}

	_, batchesBefore, _ := c.counts()
	start := time.Now()
	failed, err := s.DeleteKeys(testCtx(t), keys)
	elapsed := time.Since(start)
	if err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys of 600 keys: failed=%d err=%v", len(failed), err)
	}
	_, batches, maxInFlight := c.counts()
	if got := batches - batchesBefore; got != 3 {
		t.Errorf("DeleteKeys of 600 keys sent %d batch requests, want 3 (256+256+88)", got)
	}
	if maxInFlight > 2 {
		t.Errorf("%d batch requests were in flight at once, want at most the configured 2", maxInFlight)
	}
	t.Logf("600 deletes in %d batches took %v; at most %d batches in flight", batches-batchesBefore, elapsed, maxInFlight)

	if left := storetest.ListAll(t, s, "shoot--p--s--1/"); len(left) != 0 {
		t.Errorf("%d keys left under the prefix, e.g. %q", len(left), left[0])
	}
	if got := storetest.ListAll(t, s, ""); !slices.Equal(got, outside) {
		t.Errorf("keys outside the given set: %d left, want the 20 untouched", len(got))
	}
}

// A batch is not atomic: one sub-request can fail while the others succeed, and each
// sub-response must be read. A leased blob cannot be deleted without its lease id.
func testFailedSubRequest(t *testing.T, az azurite) {
	s := az.open(t, azure.New(), "leased")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	storetest.PutAll(t, s, []string{"l/a", "l/leased", "l/z"})
	lc, err := lease.NewBlobClient(az.containerClient(t, "leased").NewBlobClient("l/leased"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(testCtx(t), -1, nil); err != nil {
		t.Fatal(err)
	}
	failed, err := s.DeleteKeys(testCtx(t), []string{"l/a", "l/leased", "l/z", "l/missing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed["l/leased"] == nil {
		t.Fatalf("failed = %v, want just l/leased", failed)
	}
	if msg := failed["l/leased"].Error(); !strings.Contains(msg, "l/leased") || !strings.Contains(msg, "LeaseIdMissing") {
		t.Errorf("failure %q names neither the key nor the cause", msg)
	}
	if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"l/leased"}) {
		t.Errorf("left %q, want only the leased blob", got)
	}
}

func testSnapshots(t *testing.T, az azurite) {
	s := az.open(t, azure.New(), "snapshots")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	storetest.PutAll(t, s, []string{"snap/1"})
	cc := az.containerClient(t, "snapshots")
	if _, err := cc.NewBlobClient("snap/1").CreateSnapshot(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	failed, err := s.DeleteKeys(testCtx(t), []string{"snap/1"})
	if err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys of a blob with a snapshot: failed=%v err=%v", failed, err)
	}
	pager := cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Snapshots: true}, Prefix: to.Ptr("snap/")})
	for pager.More() {
		page, err := pager.NextPage(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			t.Errorf("left behind: %s (snapshot %v)", *b.Name, to.Ptr(b.Snapshot))
		}
	}
}

func testMissingContainer(t *testing.T, az azurite) {
	s := az.open(t, azure.New(), "never-created")
	for i := range 2 {
		if err := s.Delete(testCtx(t)); err != nil {
			t.Errorf("Delete #%d of a missing container: %v", i+1, err)
		}
	}
	err := s.List(testCtx(t), "x/", func([]string) error { return nil })
	if !errors.Is(err, objectstore.ErrBucketNotFound) || !strings.Contains(err.Error(), "never-created") {
		t.Errorf("List of a missing container: %v, want ErrBucketNotFound naming it", err)
	}
}
