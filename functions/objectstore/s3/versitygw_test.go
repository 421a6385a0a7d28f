package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// counter is an http.RoundTripper that counts requests by S3 operation.
type counter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[operation(r)]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counter) client() *http.Client { return &http.Client{Transport: c} }

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.ops {
		out[k] = v
	}
	return out
}

func (c *counter) total() int {
	n := 0
	for _, v := range c.snapshot() {
		n += v
	}
	return n
}

// operation names the S3 operation of a path-style request.
func operation(r *http.Request) string {
	q := r.URL.Query()
	objectPath := strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0
	switch {
	case r.Method == http.MethodPost && q.Has("delete"):
		return "DeleteObjects"
	case r.Method == http.MethodGet && q.Has("versions"):
		return "ListObjectVersions"
	case r.Method == http.MethodGet && q.Has("versioning"):
		return "GetBucketVersioning"
	case r.Method == http.MethodGet && q.Get("list-type") == "2":
		return "ListObjectsV2"
	case r.Method == http.MethodPut && objectPath:
		return "PutObject"
	}
	return r.Method + " " + r.URL.Path
}

type server struct {
	endpoint string
	creds    map[string][]byte
}

func (sv server) open(t *testing.T, p objectstore.Provider, bucket string) objectstore.Store {
	t.Helper()
	s, err := p.Open(bucket, sv.creds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawClient is a plain SDK client, to arrange what the store cannot (object lock, versions).
func (sv server) rawClient() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       stack.S3Region,
		BaseEndpoint: aws.String(sv.endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: stack.S3AccessKey, SecretAccessKey: stack.S3SecretKey}, nil
		}),
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// One S3 server serves every test here.
func TestVersityGW(t *testing.T) {
	env := testenv.Start(t, testenv.WithS3())
	sv := server{
		endpoint: env.S3.Endpoint,
		creds: map[string][]byte{
			s3.KeyAccessKeyID:      []byte(stack.S3AccessKey),
			s3.KeySecretAccessKey:  []byte(stack.S3SecretKey),
			s3.KeyRegion:           []byte(stack.S3Region),
			s3.KeyEndpoint:         []byte(env.S3.Endpoint),
			s3.KeyS3ForcePathStyle: []byte("true"),
		},
	}

	t.Run("Conformance", func(t *testing.T) {
		// Small pages and delete requests, so paging and splitting happen with few objects.
		p := s3.New(s3.WithListPageSize(7), s3.WithDeleteBatchSize(5))
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return sv.open(t, p, bucket)
		}, storetest.WithPageSize(7))
	})
	t.Run("ConformanceVersioned", func(t *testing.T) {
		p := s3.New(s3.WithListPageSize(7), s3.WithDeleteBatchSize(5), s3.WithVersioning())
		storetest.Run(t, func(t *testing.T, bucket string) objectstore.Store {
			return sv.open(t, p, "v-"+bucket[:min(len(bucket), 61)])
		}, storetest.WithPageSize(7))
	})
	t.Run("OpenResumes", func(t *testing.T) {
		u, err := url.Parse(sv.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		proxy := storetest.NewCutProxy(t, u.Host)
		cut := s3.New(s3.WithHTTPClient(&http.Client{Transport: proxy.Transport()}))
		storetest.RunResume(t, sv.open(t, s3.New(), "open-resumes"), sv.open(t, cut, "open-resumes"), proxy)
	})
	t.Run("WrongKey", func(t *testing.T) { testWrongKey(t, sv) })
	t.Run("InvalidNameSendsNothing", func(t *testing.T) { testInvalidNameSendsNothing(t, sv) })
	t.Run("DeleteKeys2500", func(t *testing.T) { testDeleteKeys2500(t, sv) })
	t.Run("VersionsAndDeleteMarkers", func(t *testing.T) { testVersionsAndDeleteMarkers(t, sv) })
	t.Run("ObjectLock", func(t *testing.T) { testObjectLock(t, sv) })
	t.Run("Immutability", func(t *testing.T) { testImmutability(t, sv) })
	t.Run("SpecRegionWins", func(t *testing.T) { testSpecRegionWins(t, sv) })
	t.Run("CopyFrom", func(t *testing.T) { testCopyFrom(t, sv) })
}

func testWrongKey(t *testing.T, sv server) {
	good := sv.open(t, s3.New(), "wrong-key")
	if err := good.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutBytes(testCtx(t), good, "k/1", []byte("v")); err != nil {
		t.Fatal(err)
	}
	const wrongSecret = "not-the-secret-key-at-all"
	for name, creds := range map[string]map[string][]byte{
		"secret": with(sv.creds, s3.KeySecretAccessKey, wrongSecret),
		"id":     with(sv.creds, s3.KeyAccessKeyID, "nobody"),
	} {
		t.Run(name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, objectstore.ErrUnauthenticated) || errors.Is(err, objectstore.ErrUnauthorized) {
					t.Errorf("%s with a wrong key: %v, want ErrUnauthenticated only", op, err)
				}
				if err != nil && (strings.Contains(err.Error(), wrongSecret) || strings.Contains(err.Error(), stack.S3SecretKey)) {
					t.Errorf("%s: the error quotes a key: %v", op, err)
				}
			}
			s, err := s3.New().Open("wrong-key", creds)
			if err != nil {
				t.Fatal(err)
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
		})
	}
	if got := storetest.ListAll(t, good, ""); !slices.Equal(got, []string{"k/1"}) {
		t.Errorf("after calls with a wrong key the bucket holds %q, want it untouched", got)
	}
}

func with(m map[string][]byte, key, value string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = v
	}
	out[key] = []byte(value)
	return out
}

func testInvalidNameSendsNothing(t *testing.T, sv server) {
	var c counter
	p := s3.New(s3.WithHTTPClient(c.client()))
	for _, name := range []string{"Invalid_Name", "a--b", "ab", "my.bucket", "sthree-x", "x-s3alias"} {
		if _, err := p.Open(name, sv.creds); !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidBucketName", name, err)
		}
	}
	if n := c.total(); n != 0 {
		t.Errorf("%d requests were sent; invalid input must fail before any", n)
	}
}

// 2,500 keys: three DeleteObjects requests (1000+1000+500), each per-key answer read.
func testDeleteKeys2500(t *testing.T, sv server) {
	var c counter
	p := s3.New(s3.WithHTTPClient(c.client()), s3.WithDeleteConcurrency(2))
	s := sv.open(t, p, "purge-2500")
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var inside, outside []string
	for i := range 2450 {
		inside = append(inside, fmt.Sprintf("shoot--p--s--1/etcd-%s/v2/Full-%08d-%08d-%d", []string{"main", "events"}[i%2], i, i+1, 1700000000+i))
	}
	for i := range 20 {
		outside = append(outside, fmt.Sprintf("shoot--p--s--10/etcd-main/v2/Full-%08d", i))
	}
	storetest.PutAll(t, s, append(slices.Clone(inside), outside...))

	before := c.snapshot()
	pages := storetest.ListPages(t, s, "shoot--p--s--1/")
	if len(pages) != 3 || len(pages[0]) != 1000 || len(pages[2]) != 450 {
		t.Errorf("List gave %d pages, want 1000+1000+450 keys", len(pages))
	}
	listed := c.snapshot()["ListObjectsV2"] - before["ListObjectsV2"]
	if listed != 3 {
		t.Errorf("listing 2450 keys took %d ListObjectsV2 requests, want 3", listed)
	}
	keys := slices.Concat(pages...)
	for i := range 50 { // keys that never existed count as deleted
		keys = append(keys, fmt.Sprintf("shoot--p--s--1/etcd-main/v2/gone-%02d", i))
	}
	before = c.snapshot()
	start := time.Now()
	failed, err := s.DeleteKeys(testCtx(t), keys)
	if err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys of 2500 keys: failed=%d err=%v", len(failed), err)
	}
	after := c.snapshot()
	if got := after["DeleteObjects"] - before["DeleteObjects"]; got != 3 {
		t.Errorf("DeleteKeys of 2500 keys sent %d DeleteObjects requests, want 3", got)
	}
	t.Logf("2500 deletes: %d DeleteObjects requests in %v, %d requests in all", after["DeleteObjects"]-before["DeleteObjects"], time.Since(start), sum(after)-sum(before))
	if left := storetest.ListAll(t, s, "shoot--p--s--1/"); len(left) != 0 {
		t.Errorf("%d keys left under the prefix, e.g. %q", len(left), left[0])
	}
	if got := storetest.ListAll(t, s, ""); !slices.Equal(got, outside) {
		t.Errorf("keys outside the given set: %d left, want the 20 untouched", len(got))
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A versioned bucket keeps old versions and delete markers under the prefix; the store lists
// them and deletes every one.
func testVersionsAndDeleteMarkers(t *testing.T, sv server) {
	const bucket = "versions-markers"
	s := sv.open(t, s3.New(s3.WithVersioning()), bucket)
	if err := s.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	raw := sv.rawClient()
	put := func(key, data string) {
		t.Helper()
		if err := objectstore.PutBytes(testCtx(t), s, key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	// Three versions of one key, a key whose only traces are a version and a delete marker,
	// and a key outside the prefix.
	for _, v := range []string{"1", "2", "3"} {
		put("shoot--p--s--1/etcd-main/v2/Full-1", v)
	}
	put("shoot--p--s--1/etcd-main/v2/Incr-2", "x")
	if _, err := raw.DeleteObject(testCtx(t), &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("shoot--p--s--1/etcd-main/v2/Incr-2")}); err != nil {
		t.Fatal(err)
	}
	put("shoot--p--s--10/etcd-main/v2/Full-1", "y")

	want := []string{"shoot--p--s--1/etcd-main/v2/Full-1", "shoot--p--s--1/etcd-main/v2/Incr-2"}
	if got := storetest.ListAll(t, s, "shoot--p--s--1/"); !slices.Equal(got, want) {
		t.Errorf("List in a versioned bucket: %q, want %q (the deleted key has a delete marker and a version left)", got, want)
	}
	if n := versions(t, raw, bucket, "shoot--p--s--1/"); n != 5 {
		t.Errorf("%d versions and delete markers under the prefix before the delete, want 5", n)
	}
	failed, err := s.DeleteKeys(testCtx(t), want)
	if err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
	}
	if n := versions(t, raw, bucket, "shoot--p--s--1/"); n != 0 {
		t.Errorf("%d versions or delete markers left under the prefix, want none", n)
	}
	if n := versions(t, raw, bucket, "shoot--p--s--10/"); n != 1 {
		t.Errorf("%d versions left outside the prefix, want the 1 untouched", n)
	}
	if err := s.Delete(testCtx(t)); err != nil {
		t.Errorf("Delete of a versioned bucket: %v", err)
	}
}

// versions counts the versions and delete markers under prefix.
func versions(t *testing.T, raw *awss3.Client, bucket, prefix string) int {
	t.Helper()
	n := 0
	pager := awss3.NewListObjectVersionsPaginator(raw, &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Versions) + len(page.DeleteMarkers)
	}
	return n
}

// Object lock: a version under retention cannot be deleted; the key fails with
// ErrObjectLocked, the others are deleted.
func testObjectLock(t *testing.T, sv server) {
	const bucket = "object-lock"
	raw := sv.rawClient()
	_, err := raw.CreateBucket(testCtx(t), &awss3.CreateBucketInput{
		Bucket:                     aws.String(bucket),
		ObjectLockEnabledForBucket: aws.Bool(true),
		CreateBucketConfiguration:  &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(stack.S3Region)},
	})
	if err != nil {
		t.Fatal(err)
	}
	const locked = "shoot--p--s--1/etcd-main/v2/Full-locked"
	_, err = raw.PutObject(testCtx(t), &awss3.PutObjectInput{
		Bucket:                    aws.String(bucket),
		Key:                       aws.String(locked),
		Body:                      strings.NewReader("kept"),
		ObjectLockMode:            types.ObjectLockModeGovernance,
		ObjectLockRetainUntilDate: aws.Time(time.Now().Add(24 * time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := sv.open(t, s3.New(), bucket)
	storetest.PutAll(t, s, []string{"shoot--p--s--1/etcd-main/v2/Incr-free"})
	failed, err := s.DeleteKeys(testCtx(t), storetest.ListAll(t, s, "shoot--p--s--1/"))
	if err != nil {
		t.Fatalf("DeleteKeys: %v", err)
	}
	if len(failed) != 1 || !errors.Is(failed[locked], objectstore.ErrObjectLocked) {
		t.Fatalf("failed = %v, want only %s, with ErrObjectLocked", failed, locked)
	}
	t.Logf("locked key: %v", failed[locked])
	if got := storetest.ListAll(t, s, "shoot--p--s--1/"); !slices.Equal(got, []string{locked}) {
		t.Errorf("left: %q, want only the locked key", got)
	}
	err = s.Delete(testCtx(t))
	var le *objectstore.LockedError
	if !errors.As(err, &le) || le.Count != 1 || le.Until.Before(time.Now().Add(23*time.Hour)) || !errors.Is(err, objectstore.ErrObjectLocked) {
		t.Errorf("Delete of a bucket with a locked object: %v, want a LockedError for 1 object until a day from now", err)
	} else {
		t.Logf("Delete: %v", err)
	}
	if marked, err := s.(objectstore.Locking).Marked(testCtx(t), locked); err != nil || !marked {
		t.Errorf("the locked object after the bucket's Delete: marked %v (%v), want it marked for deletion", marked, err)
	}
	// Governance retention can be shortened by someone allowed to; once it ends the delete
	// goes through.
	until := time.Now().Add(time.Second)
	_, err = raw.PutObjectRetention(testCtx(t), &awss3.PutObjectRetentionInput{
		Bucket: aws.String(bucket), Key: aws.String(locked), BypassGovernanceRetention: aws.Bool(true),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(until)},
	})
	if err != nil {
		t.Fatalf("shortening the retention: %v", err)
	}
	time.Sleep(time.Until(until) + 100*time.Millisecond)
	if failed, err := s.DeleteKeys(testCtx(t), []string{locked}); err != nil || len(failed) != 0 {
		t.Errorf("DeleteKeys after the retention ended: failed=%v err=%v", failed, err)
	}
	if err := s.Delete(testCtx(t)); err != nil {
		t.Errorf("Delete after the retention ended: %v", err)
	}
}

// spec.region wins over the secret's region; without either Open fails naming both.
func testSpecRegionWins(t *testing.T, sv server) {
	creds := with(sv.creds, s3.KeyRegion, "somewhere-else-1")
	s, err := objectstore.InRegion(s3.New(), stack.S3Region).Open("spec-region", creds)
	if err != nil {
		t.Fatal(err)
	}
	if got := s3.Region(s); got != stack.S3Region {
		t.Errorf("region %q, want spec.region %q", got, stack.S3Region)
	}
	if err := s.Create(testCtx(t)); err != nil {
		t.Errorf("Create in spec.region: %v", err)
	}
}

func immutability(period, mode string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","immutability":{"retentionType":"bucket","retentionPeriod":%q,"mode":%q}}`, period, mode))
}

// Immutability from providerConfig: a new bucket gets object lock and its default retention,
// which really protects a new object; an existing bucket without lock gets versioning and the
// lock; an ask never weakens what the bucket has; bad configs name their field.
func testImmutability(t *testing.T, sv server) {
	raw := sv.rawClient()
	retention := func(bucket string) string {
		t.Helper()
		out, err := raw.GetObjectLockConfiguration(testCtx(t), &awss3.GetObjectLockConfigurationInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("reading the object lock of %s: %v", bucket, err)
		}
		r := out.ObjectLockConfiguration.Rule.DefaultRetention
		return fmt.Sprintf("%s %d", r.Mode, aws.ToInt32(r.Days))
	}
	configure := func(bucket string, config []byte) string {
		t.Helper()
		note, err := sv.open(t, s3.New(), bucket).(objectstore.Configurable).CreateWithConfig(testCtx(t), config)
		if err != nil {
			t.Fatalf("CreateWithConfig %s: %v", bucket, err)
		}
		return note
	}

	const bucket = "immutable-new"
	if note := configure(bucket, immutability("24h", "governance")); !strings.Contains(note, "object lock set: GOVERNANCE for 1 days") {
		t.Errorf("note %q", note)
	}
	if got := retention(bucket); got != "GOVERNANCE 1" {
		t.Fatalf("default retention %q, want GOVERNANCE 1", got)
	}
	s := sv.open(t, s3.New(), bucket)
	storetest.PutAll(t, s, []string{"shoot--i--s--1/etcd-main/v2/Full-1"})
	failed, err := s.DeleteKeys(testCtx(t), []string{"shoot--i--s--1/etcd-main/v2/Full-1"})
	if err != nil || !errors.Is(failed["shoot--i--s--1/etcd-main/v2/Full-1"], objectstore.ErrObjectLocked) {
		t.Fatalf("deleting a new object of the immutable bucket: failed %v, err %v; want it locked by the default retention", failed, err)
	}
	if note := configure(bucket, immutability("24h", "governance")); note != "" {
		t.Errorf("the same ask again: note %q, want none", note)
	}
	// Weaker asks keep what the bucket has.
	if note := configure(bucket, nil); !strings.Contains(note, "never removed") || retention(bucket) != "GOVERNANCE 1" {
		t.Errorf("no immutability: note %q, retention %s; want the lock kept", note, retention(bucket))
	}
	// Longer and compliance: the union.
	if note := configure(bucket, immutability("48h", "governance")); retention(bucket) != "GOVERNANCE 2" {
		t.Errorf("a longer period: note %q, retention %s", note, retention(bucket))
	}
	if note := configure(bucket, immutability("24h", "compliance")); retention(bucket) != "COMPLIANCE 2" || !strings.Contains(note, "never weakened") {
		t.Errorf("compliance for a shorter period: note %q, retention %s; want COMPLIANCE 2 and the reason", note, retention(bucket))
	}
	if note := configure(bucket, immutability("24h", "governance")); retention(bucket) != "COMPLIANCE 2" || !strings.Contains(note, "would weaken") {
		t.Errorf("a weaker ask: note %q, retention %s; want COMPLIANCE 2 kept", note, retention(bucket))
	}

	// An existing bucket made without object lock.
	plain := sv.open(t, s3.New(), "immutable-later")
	if err := plain.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if note, err := plain.(objectstore.Configurable).CreateWithConfig(testCtx(t), immutability("72h", "governance")); err != nil {
		t.Logf("object lock on an existing bucket: %v (note %q)", err, note)
		t.Errorf("versitygw refuses object lock on an existing bucket: %v", err)
	} else if got := retention("immutable-later"); got != "GOVERNANCE 3" {
		t.Errorf("existing bucket: retention %q, want GOVERNANCE 3", got)
	}

	for _, tc := range []struct{ config, mention string }{
		{string(immutability("36h", "governance")), "retentionPeriod"},
		{string(immutability("12h", "governance")), "retentionPeriod"},
		{string(immutability("24h", "legal")), "mode"},
		{`{"immutability":{"retentionType":"object","retentionPeriod":"24h","mode":"governance"}}`, "retentionType"},
		{`{"immutabilty":{}}`, "immutabilty"},
	} {
		_, err := sv.open(t, s3.New(), "immutable-bad").(objectstore.Configurable).CreateWithConfig(testCtx(t), []byte(tc.config))
		if !errors.Is(err, objectstore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("config %s: %v, want ErrInvalidConfig naming %s", tc.config, err, tc.mention)
		}
	}
}
