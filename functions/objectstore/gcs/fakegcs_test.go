package gcs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// counter is an http.RoundTripper that counts requests by kind and keeps the bodies of bucket
// creations.
type counter struct {
	base    http.RoundTripper
	mu      sync.Mutex
	ops     map[string]int
	creates [][]byte
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := operation(r)
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[op]++
	c.mu.Unlock()
	if op == "bucket insert" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		c.mu.Lock()
		c.creates = append(c.creates, body)
		c.mu.Unlock()
	}
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

func (c *counter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

func operation(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/batch/"):
		return "batch"
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/storage/v1/b"):
		return "bucket insert"
	case r.Method == http.MethodDelete && strings.Contains(p, "/o/"):
		return "object delete"
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/o"):
		return "object list"
	}
	return r.Method + " " + p
}

type server struct {
	env   *testenv.Env
	creds map[string][]byte
}

// provider is a provider of the server's endpoint.
func (sv server) provider(t *testing.T, opts ...gcs.Option) objectstore.Provider {
	t.Helper()
	p, err := gcs.New(opts...).InRegion(stack.GCSRegion).(objectstore.Configured).Configure(endpointConfig(sv.env.GCS.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func endpointConfig(endpoint string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"gcp.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","store":{"endpointOverride":%q}}`, endpoint)
}

func (sv server) open(t *testing.T, p objectstore.Provider, bucket string) objectstore.Store {
	t.Helper()
	s, err := p.Open(bucket, sv.creds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// One fake-gcs-server serves every test here.
func TestFakeGCSServer(t *testing.T) {
	env := testenv.Start(t, testenv.WithGCS())
	key, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	sv := server{env: env, creds: map[string][]byte{gcs.KeyServiceAccountJSON: key}}

	t.Run("Conformance", func(t *testing.T) {
		// Small pages and batches, so paging and splitting happen with few objects.
		p := sv.provider(t, gcs.WithListPageSize(7), gcs.WithBatchSize(5))
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return sv.open(t, p, bucket)
		}, storetest.WithPageSize(7))
	})
	t.Run("ConformanceSingleDeletes", func(t *testing.T) {
		p := sv.provider(t, gcs.WithListPageSize(7), gcs.WithoutBatch())
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return sv.open(t, p, "s-"+bucket[:min(len(bucket), 61)])
		}, storetest.WithPageSize(7))
	})
	t.Run("OpenResumes", func(t *testing.T) {
		u, err := url.Parse(sv.env.GCS.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := storetest.NewCutProxy(t, u.Host)
		storetest.RunResume(t, sv.open(t, sv.provider(t), "open-resumes"), sv.open(t, sv.provider(t, gcs.WithTransport(proxy.Transport())), "open-resumes"), proxy)
	})
	t.Run("CreateAsUpstream", func(t *testing.T) { testCreateAsUpstream(t, sv) })
	t.Run("DeleteKeys2500", func(t *testing.T) { testDeleteKeys2500(t, sv) })
	t.Run("NoBatchEndpoint", func(t *testing.T) { testNoBatchEndpoint(t, sv) })
	t.Run("InvalidNameSendsNothing", func(t *testing.T) { testInvalidNameSendsNothing(t, sv) })
	t.Run("Authenticated", func(t *testing.T) { testAuthenticated(t, sv) })
	t.Run("CopyFrom", func(t *testing.T) { testCopyFrom(t, sv) })
}

// The bucket is created with what upstream gives it: uniform bucket-level access, soft delete
// off and the custom-time lifecycle rule, in the spec's region. fake-gcs-server keeps none of
// them, so the request is what is checked.
func testCreateAsUpstream(t *testing.T, sv server) {
	c := &counter{}
	s := sv.open(t, sv.provider(t, gcs.WithTransport(c)), "created-as-upstream")
	for range 2 { // the second finds it there
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.creates) != 2 {
		t.Fatalf("%d bucket inserts sent, want 2", len(c.creates))
	}
	var got struct {
		Name      string `json:"name"`
		Location  string `json:"location"`
		IAMConfig struct {
			UniformBucketLevelAccess struct{ Enabled bool } `json:"uniformBucketLevelAccess"`
		} `json:"iamConfiguration"`
		SoftDelete *struct{ RetentionDurationSeconds string } `json:"softDeletePolicy"`
		Lifecycle  struct{ Rule []json.RawMessage }           `json:"lifecycle"`
	}
	if err := json.Unmarshal(c.creates[0], &got); err != nil {
		t.Fatal(err)
	}
	rule := ""
	if len(got.Lifecycle.Rule) == 1 {
		rule = string(got.Lifecycle.Rule[0])
	}
	if got.Name != "created-as-upstream" || got.Location != stack.GCSRegion || !got.IAMConfig.UniformBucketLevelAccess.Enabled ||
		got.SoftDelete == nil || got.SoftDelete.RetentionDurationSeconds != "0" ||
		!strings.Contains(rule, `"type":"Delete"`) || !strings.Contains(rule, `"daysSinceCustomTime":1`) {
		t.Errorf("bucket insert sent %s; want name, location %s, uniform access, soft delete 0 and a Delete rule at daysSinceCustomTime 1", c.creates[0], stack.GCSRegion)
	}
}

// 2,500 objects go in 25 batch requests of 100, and the listing pages by 1000.
func testDeleteKeys2500(t *testing.T, sv server) {
	c := &counter{}
	s := sv.open(t, sv.provider(t, gcs.WithTransport(c)), "delete-keys-2500")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 2500)
	for i := range keys {
		keys[i] = fmt.Sprintf("entry/etcd-main/v2/Full-%05d", i)
	}
	storetest.PutAll(t, s, append(slices.Clone(keys), "other/keep"))
	var listed []string
	if err := s.List(testCtx(t), "entry/", func(page []string) error {
		if len(page) > gcs.MaxListPage {
			t.Errorf("a page of %d names", len(page))
		}
		listed = append(listed, page...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(listed, keys) {
		t.Fatalf("listed %d names, want the %d written in order", len(listed), len(keys))
	}
	if n := c.count("object list"); n != 3 {
		t.Errorf("%d list requests for 2500 names, want 3", n)
	}
	failed, err := s.DeleteKeys(testCtx(t), keys)
	if err != nil || failed != nil {
		t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
	}
	if n, single := c.count("batch"), c.count("object delete"); n != 25 || single != 0 {
		t.Errorf("%d batch requests and %d single deletes for 2500 keys, want 25 and 0", n, single)
	}
	if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"other/keep"}) {
		t.Errorf("left %d objects, want only other/keep: %q", len(got), got[:min(len(got), 5)])
	}
}

// noBatch answers the batch endpoint as a server without one does.
type noBatch struct{ counter }

func (n *noBatch) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/batch/") {
		n.mu.Lock()
		if n.ops == nil {
			n.ops = map[string]int{}
		}
		n.ops["batch"]++
		n.mu.Unlock()
		return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("not found")), Request: r}, nil
	}
	return n.counter.RoundTrip(r)
}

// A server that turns the batch endpoint down gets single deletes, and is asked once.
func testNoBatchEndpoint(t *testing.T, sv server) {
	c := &noBatch{}
	s := sv.open(t, sv.provider(t, gcs.WithTransport(c), gcs.WithBatchSize(10)), "no-batch-endpoint")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "a/9", "a/10", "a/11", "a/12", "a/13", "a/14", "a/15"}
	storetest.PutAll(t, s, keys)
	for _, half := range [][]string{keys[:10], keys[10:]} {
		failed, err := s.DeleteKeys(testCtx(t), half)
		if err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
	}
	if got := storetest.ListAll(t, s, ""); len(got) != 0 {
		t.Errorf("left %q", got)
	}
	if n, single := c.count("batch"), c.count("object delete"); n != 1 || single != 15 {
		t.Errorf("%d batch requests and %d single deletes, want 1 (turned down) and 15", n, single)
	}
}

func testInvalidNameSendsNothing(t *testing.T, sv server) {
	c := &counter{}
	p := sv.provider(t, gcs.WithTransport(c))
	for _, name := range []string{"Upper", "goog-backups", "my-google-bucket", "a", "under_score"} {
		if _, err := p.Open(name, sv.creds); !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("Open(%q): %v, want ErrInvalidBucketName", name, err)
		}
	}
	if len(c.ops) != 0 {
		t.Errorf("requests were sent: %v", c.ops)
	}
}
