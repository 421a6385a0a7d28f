package swift_test

import (
	"bytes"
	"context"
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

	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// counter counts requests by method and path kind; info, when set, answers the proxy's /info
// in its place (status and body), as a proxy configured otherwise would.
type counter struct {
	mu   sync.Mutex
	ops  map[string]int
	info func() (int, string)
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Method
	switch {
	case r.URL.Query().Has("bulk-delete"):
		op = "bulk delete"
	case strings.HasSuffix(r.URL.Path, "/auth/tokens"):
		op = "token"
	case r.URL.Path == "/info":
		op = "info"
	}
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[op]++
	c.mu.Unlock()
	if op == "info" && c.info != nil {
		status, body := c.info()
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, p objectstore.Provider, bucket string, creds map[string][]byte) objectstore.Store {
	t.Helper()
	s, err := objectstore.InRegion(p, stack.SwiftRegion).Open(bucket, creds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// One Swift behind one Keystone serves every test here.
func TestSwift(t *testing.T) {
	env := testenv.Start(t, testenv.WithSwift())
	sw := env.Swift
	password := map[string][]byte{
		swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte(stack.SwiftDomain), swift.KeyTenantName: []byte(stack.SwiftProject),
		swift.KeyUsername: []byte(stack.SwiftUser), swift.KeyPassword: []byte(stack.SwiftPassword),
	}
	appCred := map[string][]byte{
		swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte(stack.SwiftDomain), swift.KeyTenantName: []byte(stack.SwiftProject),
		swift.KeyApplicationCredentialID: []byte(sw.ApplicationCredentialID), swift.KeyApplicationCredentialSecret: []byte(sw.ApplicationCredentialSecret),
	}

	t.Run("Conformance", func(t *testing.T) {
		// Small pages and bulk deletes, so paging and splitting happen with few objects.
		p := swift.New(swift.WithListPageSize(7), swift.WithBatchSize(5))
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store { return open(t, p, bucket, password) }, storetest.WithPageSize(7))
	})
	t.Run("ConformanceSingleDeletes", func(t *testing.T) {
		p := swift.New(swift.WithListPageSize(7), swift.WithoutBulk())
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return open(t, p, "s-"+bucket[:min(len(bucket), 61)], password)
		}, storetest.WithPageSize(7))
	})
	t.Run("OpenResumes", func(t *testing.T) {
		u, err := url.Parse(sw.ProxyURL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := storetest.NewCutProxy(t, u.Host)
		cut := open(t, swift.New(swift.WithTransport(proxy.Transport())), "open-resumes", password)
		storetest.RunResume(t, open(t, swift.New(), "open-resumes", password), cut, proxy)
		t.Run("DynamicLargeObject", func(t *testing.T) { testResumeDLO(t, open(t, swift.New(), "open-resumes", password), cut, proxy) })
	})
	t.Run("ApplicationCredential", func(t *testing.T) {
		s := open(t, swift.New(), "application-credential", appCred)
		if err := s.Create(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		storetest.PutAll(t, s, []string{"a/1", "b/1"})
		if failed, err := s.DeleteKeys(testCtx(t), []string{"a/1"}); err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"b/1"}) {
			t.Errorf("left %q, want [b/1]", got)
		}
	})
	t.Run("CopyFrom", func(t *testing.T) { testCopyFrom(t, password) })
	t.Run("WrongPassword", func(t *testing.T) {
		const wrong = "not-the-password-at-all"
		creds := map[string][]byte{}
		for k, v := range password {
			creds[k] = v
		}
		creds[swift.KeyPassword] = []byte(wrong)
		s := open(t, swift.New(), "wrong-password", creds)
		for op, err := range map[string]error{
			"Create": s.Create(testCtx(t)),
			"List":   s.List(testCtx(t), "", func([]string) error { return nil }),
		} {
			if !errors.Is(err, objectstore.ErrUnauthenticated) {
				t.Errorf("%s with a wrong password: %v, want ErrUnauthenticated", op, err)
			}
			if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), stack.SwiftPassword)) {
				t.Errorf("%s: the error quotes a password: %v", op, err)
			}
		}
	})
	t.Run("OtherRegion", func(t *testing.T) {
		s, err := objectstore.InRegion(swift.New(), "elsewhere").Open("other-region", password)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Create(testCtx(t)); !errors.Is(err, objectstore.ErrInvalidCredentials) || !strings.Contains(err.Error(), `"elsewhere"`) {
			t.Errorf("Create in a region without Swift: %v, want ErrInvalidCredentials naming the region", err)
		}
	})
	t.Run("DeleteKeysInBulks", func(t *testing.T) {
		// Bulk deletes of at most what the proxy's /info says it takes: the stack's proxy takes
		// 100 names (max_deletes_per_request), not housekeeper's own 1000, so 250 keys are three
		// bulk deletes, and /info is read once. (Swift's Python servers write a few hundred
		// objects a second here: few keys, small batches.)
		c := &counter{}
		s := open(t, swift.New(swift.WithTransport(c)), "delete-keys-in-bulks", password)
		keys := putForDelete(t, s, 250)
		failed, err := s.DeleteKeys(testCtx(t), keys[:200])
		if err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if failed, err := s.DeleteKeys(testCtx(t), keys[200:]); err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if n, single := c.count("bulk delete"), c.count(http.MethodDelete); n != 3 || single != 0 {
			t.Errorf("%d bulk deletes and %d single deletes for 200 and 50 keys, the proxy taking %d a request; want 3 and 0", n, single, stack.SwiftMaxDeletesPerRequest)
		}
		if n := c.count("info"); n != 1 {
			t.Errorf("/info read %d times, want once (the store keeps its limit)", n)
		}
		if n := c.count("token"); n != 1 {
			t.Errorf("%d token requests, want 1 (the store authenticates once)", n)
		}
		if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"other/keep"}) {
			t.Errorf("left %d objects, want only other/keep", len(got))
		}
	})
	t.Run("DeleteKeysWithoutInfo", func(t *testing.T) {
		// A proxy that hides /info gets bulk deletes of 1000 names; the real proxy refuses one
		// larger than it takes, naming its maximum, which the store keeps: the refused keys go
		// again in bulk deletes that small, and so do the next call's.
		c := &counter{info: func() (int, string) { return http.StatusForbidden, "" }}
		s := open(t, swift.New(swift.WithTransport(c)), "delete-keys-without-info", password)
		keys := putForDelete(t, s, 250)
		if failed, err := s.DeleteKeys(testCtx(t), keys[:150]); err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if n := c.count("bulk delete"); n != 3 {
			t.Errorf("%d bulk deletes for 150 keys, want 3: one refused, then 100 and 50", n)
		}
		if failed, err := s.DeleteKeys(testCtx(t), keys[150:]); err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if n, single, info := c.count("bulk delete"), c.count(http.MethodDelete), c.count("info"); n != 4 || single != 0 || info != 1 {
			t.Errorf("%d bulk deletes, %d single deletes and %d /info reads in all; want 4, 0 and 1 (the second call's 100 keys in one)", n, single, info)
		}
		if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"other/keep"}) {
			t.Errorf("left %d objects, want only other/keep", len(got))
		}
	})
	t.Run("DeleteKeysWithoutBulk", func(t *testing.T) {
		// A proxy whose /info lists no bulk_delete offers none: one delete per object, no bulk
		// delete tried.
		c := &counter{info: func() (int, string) { return http.StatusOK, `{"swift":{"version":"2.30.1"}}` }}
		s := open(t, swift.New(swift.WithTransport(c)), "delete-keys-without-bulk", password)
		keys := putForDelete(t, s, 20)
		if failed, err := s.DeleteKeys(testCtx(t), keys); err != nil || failed != nil {
			t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
		}
		if n, single := c.count("bulk delete"), c.count(http.MethodDelete); n != 0 || single != len(keys) {
			t.Errorf("%d bulk deletes and %d single deletes for %d keys, want 0 and %d", n, single, len(keys), len(keys))
		}
		if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"other/keep"}) {
			t.Errorf("left %d objects, want only other/keep", len(got))
		}
	})
	t.Run("InvalidCredentialsSendNothing", func(t *testing.T) {
		c := &counter{}
		p := swift.New(swift.WithTransport(c))
		for name, creds := range map[string]map[string][]byte{
			"no authURL":       {swift.KeyDomainName: []byte("d"), swift.KeyTenantName: []byte("t"), swift.KeyUsername: []byte("u"), swift.KeyPassword: []byte("p")},
			"no secret":        {swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte("d"), swift.KeyTenantName: []byte("t"), swift.KeyUsername: []byte("u")},
			"password and app": {swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte("d"), swift.KeyTenantName: []byte("t"), swift.KeyUsername: []byte("u"), swift.KeyPassword: []byte("p"), swift.KeyApplicationCredentialSecret: []byte("s")},
			"bad caCert":       {swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte("d"), swift.KeyTenantName: []byte("t"), swift.KeyUsername: []byte("u"), swift.KeyPassword: []byte("p"), swift.KeyCACert: []byte("nope")},
		} {
			if _, err := p.Open("some-container", creds); !errors.Is(err, objectstore.ErrMissingCredentials) && !errors.Is(err, objectstore.ErrInvalidCredentials) {
				t.Errorf("%s: %v, want a credentials error", name, err)
			}
		}
		if len(c.ops) != 0 {
			t.Errorf("requests were sent: %v", c.ops)
		}
	})
}

// putForDelete creates the store's container and writes n keys to delete, listed in order, and
// other/keep.
func putForDelete(t *testing.T, s objectstore.Store, n int) []string {
	t.Helper()
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("entry/etcd-main/v2/Full-%05d", i)
	}
	storetest.PutAll(t, s, append(slices.Clone(keys), "other/keep"))
	if got := storetest.ListAll(t, s, "entry/"); !slices.Equal(got, keys) {
		t.Fatalf("listed %d names, want the %d written in order", len(got), len(keys))
	}
	return keys
}

// etcd-backup-restore writes a snapshot to Swift as a dynamic large object: segments and a
// manifest naming their prefix. A read of it broken mid-way resumes too (Swift answers the
// manifest's GET with the segments' Etag, and checks If-Match against it), and fails once a
// segment was replaced.
func testResumeDLO(t *testing.T, direct, cut objectstore.Store, proxy *storetest.CutProxy) {
	const segment = 1 << 20
	var whole []byte
	for i := range 3 {
		seg := bytes.Repeat([]byte{byte('a' + i)}, segment+i)
		whole = append(whole, seg...)
		if err := objectstore.PutBytes(testCtx(t), direct, fmt.Sprintf("dlo/snap/chunk_%02d", i), seg); err != nil {
			t.Fatal(err)
		}
	}
	c, err := swift.ObjectStorage(testCtx(t), direct)
	if err != nil {
		t.Fatal(err)
	}
	manifest := objects.CreateOpts{Content: strings.NewReader(""), ObjectManifest: "open-resumes/dlo/snap/chunk_"}
	if _, err := objects.Create(testCtx(t), c, "open-resumes", "dlo/snap", manifest).Extract(); err != nil {
		t.Fatal(err)
	}
	// The manifest's ETag is a digest of its segments' ETags, no MD5 of its content; a
	// segment's is.
	if info, err := direct.Stat(testCtx(t), "dlo/snap"); err != nil || info.Size != int64(len(whole)) || info.MD5 != nil {
		t.Errorf("Stat of the manifest: %+v, %v; want %d bytes, no MD5", info, err, len(whole))
	}
	if info, err := direct.Stat(testCtx(t), "dlo/snap/chunk_00"); err != nil || info.MD5 == nil {
		t.Errorf("Stat of a segment: %+v, %v; want its MD5", info, err)
	}

	proxy.Cut("/dlo/snap", 1, segment+segment/2, nil)
	r, err := cut.Open(testCtx(t), "dlo/snap")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, whole) {
		t.Errorf("read of a dynamic large object through a broken connection: %d bytes, %v; want the %d of its segments", len(got), err, len(whole))
	}
	if gets := proxy.GETs("/dlo/snap"); gets < 2 {
		t.Errorf("%d GETs of the manifest; want the broken one and one resuming it at least", gets)
	}

	proxy.Cut("/dlo/snap", 1, segment/2, func() {
		if err := objectstore.PutBytes(testCtx(t), direct, "dlo/snap/chunk_02", []byte("replaced")); err != nil {
			t.Errorf("replacing a segment: %v", err)
		}
	})
	r, err = cut.Open(testCtx(t), "dlo/snap")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err = io.ReadAll(r)
	if !errors.Is(err, objectstore.ErrObjectChanged) || !bytes.Equal(got, whole[:len(got)]) {
		t.Errorf("read of a dynamic large object whose segment was replaced after the break: %d bytes, %v; want the old object's start, ErrObjectChanged", len(got), err)
	} else {
		t.Logf("read error: %v", err)
	}
}
