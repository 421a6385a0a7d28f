package replica_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The entry whose backups are copied, and etcd-backup-restore-shaped objects under it: full
// snapshots and deltas, one full snapshot above S3's single-PutObject size (a multipart upload
// at an S3 destination), an empty delta, and the chunks of an upload that did not finish, as
// its GCS and Swift stores leave them (<snapshot>/<chunk>; a local bucket cannot hold them
// beside the snapshot of their name).
const prefix = "shoot--dev--a--1f2e/"

type object struct {
	key  string
	size int
}

var backups = []object{
	{prefix + "etcd-main/v2/Full-00000000-00000120-1764400000.gz", objectstore.UploadPartSize + 4099},
	{prefix + "etcd-main/v2/Incr-00000121-00000180-1764400300.gz", 300 << 10},
	{prefix + "etcd-main/v2/Incr-00000181-00000240-1764400600.gz", 1 << 20},
	{prefix + "etcd-main/v2/Incr-00000241-00000241-1764400900.gz", 0},
	{prefix + "etcd-main/v2/Full-00000000-00000300-1764401200", 5<<20 + 17},
	{prefix + "etcd-main/v2/Full-00000000-00000400-1764401800/0000000001", 3 << 20},
	{prefix + "etcd-main/v2/Full-00000000-00000400-1764401800/0000000002", 2<<20 + 17},
	{prefix + "etcd-main/v2/Incr-00000301-00000360-1764401500.gz", 200 << 10},
	{prefix + "etcd-events/v2/Full-00000000-00000090-1764400010.gz", 700 << 10},
}

// newest is what the first copy reports as the newest object copied: the highest last revision.
var newest = prefix + "etcd-main/v2/Incr-00000301-00000360-1764401500.gz"

// Objects outside the prefix: at the source (one only a string prefix apart) and at the
// destination, one under the same key as a source object outside the prefix, with other content.
var (
	sourceOutside = []object{
		{"shoot--dev--a--1f2e-other/etcd-main/v2/Full-00000000-00000010-1764400000.gz", 64 << 10},
		{"shoot--dev--b--9a8b/etcd-main/v2/Full-00000000-00000005-1764400000.gz", 32 << 10},
	}
	destinationOutside = []object{
		{"shoot--dev--a--1f2e-other/etcd-main/v2/Full-00000000-00000010-1764400000.gz", 1000},
		{"shoot--dev--c--7c7c/etcd-main/v2/Full-00000000-00000050-1764300000.gz", 128 << 10},
	}
)

// content is a deterministic pseudo-random body for key, different per seed.
func content(key string, size int, seed byte) []byte {
	var s [32]byte
	copy(s[:], key)
	s[31] ^= seed
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h)
}

func put(t *testing.T, s objectstore.Store, objects []object, seed byte) map[string]string {
	t.Helper()
	sums := map[string]string{}
	for _, o := range objects {
		b := content(o.key, o.size, seed)
		if err := objectstore.PutBytes(testCtx(t), s, o.key, b); err != nil {
			t.Fatalf("put %q: %v", o.key, err)
		}
		sums[o.key] = sum(b)
	}
	return sums
}

// contents reads every object of the store: key → SHA-256.
func contents(t *testing.T, s objectstore.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.List(testCtx(t), "", func(keys []string) error {
		for _, k := range keys {
			b := read(t, s, k)
			out[k] = sum(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return out
}

func read(t *testing.T, s objectstore.Store, key string) []byte {
	t.Helper()
	r, err := s.Open(testCtx(t), key)
	if err != nil {
		t.Fatalf("Open %q: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return b
}

func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func sameContents(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %q is missing", what, k)
		} else if g != w {
			t.Errorf("%s: %q has sha256 %s, want %s", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %q should not be there", what, k)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// stores opens buckets of one provider.
type stores struct {
	name string
	open func(t *testing.T, bucket string) objectstore.Store
	// secrets must appear in no log line or error.
	secrets []string
}

func (s stores) create(t *testing.T, bucket string) objectstore.Store {
	t.Helper()
	st := s.open(t, bucket)
	if err := st.Create(testCtx(t)); err != nil {
		t.Fatalf("%s: Create %q: %v", s.name, bucket, err)
	}
	return st
}

// observed is a logger whose entries the test reads, rendered as JSON lines.
func observed() (*zap.Logger, func() []string) {
	core, logs := observer.New(zapcore.DebugLevel)
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(core), func() []string {
		var lines []string
		for _, e := range logs.All() {
			buf, err := enc.EncodeEntry(e.Entry, e.Context)
			if err != nil {
				lines = append(lines, fmt.Sprintf("unencodable entry %q: %v", e.Message, err))
				continue
			}
			lines = append(lines, buf.String())
			buf.Free()
		}
		return lines
	}
}

// One server per provider serves every pair.
func TestCopy(t *testing.T) {
	env := testenv.Start(t, testenv.WithS3(), testenv.WithGCS(), testenv.WithAzurite())

	localS := localStores()
	s3Creds := map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(env.S3.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
	}
	s3Stores := stores{name: "s3", secrets: []string{stack.S3SecretKey}, open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := s3.New().Open(bucket, s3Creds)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
	gcsKey, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	var sa struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(gcsKey, &sa); err != nil || len(sa.PrivateKey) < 100 {
		t.Fatalf("the GCS server's service account key: %v", err)
	}
	gcsProvider, err := gcs.New().InRegion(stack.GCSRegion).(objectstore.Configured).Configure(fmt.Appendf(nil,
		`{"apiVersion":"gcp.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","store":{"endpointOverride":%q}}`, env.GCS.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	gcsStores := stores{name: "gcs", secrets: []string{sa.PrivateKey[40:100]}, open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := gcsProvider.Open(bucket, map[string][]byte{gcs.KeyServiceAccountJSON: gcsKey})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
	azureStores := stores{name: "azure", secrets: []string{stack.AzuriteKey}, open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := azure.New().Open(bucket, map[string][]byte{
			azure.KeyStorageAccount: []byte(stack.AzuriteAccount), azure.KeyStorageKey: []byte(stack.AzuriteKey),
			azure.KeyEndpoint: []byte(env.Azurite.Endpoint),
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}

	// The same server under another name: S3 cannot copy between endpoints, so every object
	// streams. (The first store is s3Stores under another name, for bucket names of its own.)
	s3First := s3Stores
	s3First.name = "s3-first"
	otherEndpoint := maps.Clone(s3Creds)
	otherEndpoint[s3.KeyEndpoint] = []byte(strings.Replace(env.S3.Endpoint, "127.0.0.1", "localhost", 1))
	s3Localhost := stores{name: "s3-localhost", secrets: s3Stores.secrets, open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := s3.New().Open(bucket, otherEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}

	t.Run("etcd-backup-restore-local-to-s3", func(t *testing.T) { testRealBackup(t, s3Stores) })
	t.Run("s3-to-s3-denied", func(t *testing.T) { testServerSideDenied(t, s3Stores, s3Creds) })
	t.Run("local-to-s3-wrong-secret", func(t *testing.T) {
		const wrong = "not-the-secret-key-at-all"
		s3Stores.create(t, "second-wrong-secret")
		creds := maps.Clone(s3Creds)
		creds[s3.KeySecretAccessKey] = []byte(wrong)
		dst, err := s3.New().Open("second-wrong-secret", creds)
		if err != nil {
			t.Fatal(err)
		}
		testRejectedCredentials(t, localS, dst, []string{wrong, stack.S3SecretKey})
	})

	for _, p := range []struct {
		src, dst stores
		// How the first copy verifies the written objects: by the destination's MD5, or by
		// reading them back.
		byMD5, bySHA256 int
		// How many the destination copies server-side.
		serverSide int
	}{
		// local reports no MD5; S3 reports one for objects written in one PutObject: all but
		// the full snapshot above a part's size.
		{src: localS, dst: s3Stores, byMD5: len(backups) - 1, bySHA256: 1},
		// GCS reports an MD5 for every object written whole.
		{src: s3Stores, dst: gcsStores, byMD5: len(backups), bySHA256: 0},
		{src: azureStores, dst: s3Stores, byMD5: len(backups) - 1, bySHA256: 1},
		// One provider: copied server-side. CopyObject gives the copy of a multipart upload an
		// ETag that is its MD5: the source is read once, and the copy verified by its MD5.
		{src: s3Stores, dst: s3Stores, byMD5: len(backups), bySHA256: 0, serverSide: len(backups)},
		{src: s3First, dst: s3Localhost, byMD5: len(backups) - 1, bySHA256: 1},
		{src: gcsStores, dst: gcsStores, byMD5: len(backups), bySHA256: 0, serverSide: len(backups)},
		// Copy Blob carries Content-MD5 over; the blob committed from blocks has none, and is
		// read at both ends.
		{src: azureStores, dst: azureStores, byMD5: len(backups) - 1, bySHA256: 1, serverSide: len(backups)},
	} {
		t.Run(p.src.name+"-to-"+p.dst.name, func(t *testing.T) { testPair(t, p.src, p.dst, p.byMD5, p.bySHA256, p.serverSide) })
	}
}

// Swift, whose Keystone takes longest to start, on its own: go test -run TestCopyToSwift.
func TestCopyToSwift(t *testing.T) {
	sw := testenv.Start(t, testenv.WithSwift()).Swift
	creds := map[string][]byte{
		swift.KeyAuthURL: []byte(sw.AuthURL), swift.KeyDomainName: []byte(stack.SwiftDomain), swift.KeyTenantName: []byte(stack.SwiftProject),
		swift.KeyUsername: []byte(stack.SwiftUser), swift.KeyPassword: []byte(stack.SwiftPassword),
	}
	swiftStores := stores{name: "swift", secrets: []string{stack.SwiftPassword}, open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := objectstore.InRegion(swift.New(), stack.SwiftRegion).Open(bucket, creds)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
	// Swift's ETag is the MD5 of every object written in one PUT.
	t.Run("local-to-swift", func(t *testing.T) { testPair(t, localStores(), swiftStores, len(backups), 0, 0) })
	t.Run("swift-to-swift", func(t *testing.T) { testPair(t, swiftStores, swiftStores, len(backups), 0, len(backups)) })
}

func localStores() stores {
	return stores{name: "local", open: func(t *testing.T, bucket string) objectstore.Store {
		s, err := local.New(t.TempDir()).Open(bucket, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}
}

func testPair(t *testing.T, src, dst stores, byMD5, bySHA256, serverSide int) {
	secrets := slices.Concat(src.secrets, dst.secrets)
	t.Run("Copy", func(t *testing.T) { testCopy(t, src, dst, byMD5, bySHA256, serverSide, secrets) })
	t.Run("RefusedWrites", func(t *testing.T) { testRefusedWrites(t, src, dst, secrets) })
	t.Run("VerifyFails", func(t *testing.T) { testVerifyFails(t, src, dst) })
}

// testCopy copies the backups, copies again, finds a byte flipped in the copy, copies an
// object removed from the copy again, and leaves everything outside the prefix alone.
func testCopy(t *testing.T, ss, ds stores, byMD5, bySHA256, serverSide int, secrets []string) {
	src, dst := ss.create(t, "backups-copy-"+ds.name), ds.create(t, "second-copy-"+ss.name)
	want := put(t, src, backups, 1)
	srcBefore := union(want, put(t, src, sourceOutside, 2))
	dstOutside := put(t, dst, destinationOutside, 3)
	log, lines := observed()
	run := func() (*replica.Report, error) {
		t.Helper()
		rep, err := replica.Copy(testCtx(t), src, dst, prefix, replica.WithLogger(log), replica.WithConcurrency(3))
		if rep == nil {
			t.Fatalf("Copy returned no report (error %v)", err)
		}
		return rep, err
	}

	// 1. Everything is copied, verified, and matches.
	rep, err := run()
	if err != nil {
		t.Fatalf("first copy: %v (report %+v)", err, rep)
	}
	var total int64
	for _, o := range backups {
		total += int64(o.size)
	}
	if rep.Listed != len(backups) || rep.Copied != len(backups) || rep.CopiedBytes != total || rep.Skipped != 0 ||
		len(rep.Differing) != 0 || len(rep.Failed) != 0 || rep.Newest != newest {
		t.Errorf("first copy: %+v; want %d objects, %d bytes copied, the newest %q", rep, len(backups), total, newest)
	}
	if rep.VerifiedByMD5 != byMD5 || rep.VerifiedBySHA256 != bySHA256 {
		t.Errorf("first copy verified %d objects by MD5 and %d by SHA-256 read back, want %d and %d", rep.VerifiedByMD5, rep.VerifiedBySHA256, byMD5, bySHA256)
	}
	if rep.ServerSide != serverSide {
		t.Errorf("first copy: %d objects copied server-side, want %d", rep.ServerSide, serverSide)
	}
	sameContents(t, "destination after the first copy", contents(t, dst), union(dstOutside, want))
	sameContents(t, "source after the first copy", contents(t, src), srcBefore)

	// 2. Again: nothing to copy, every object compared and skipped.
	rep, err = run()
	if err != nil || rep.Copied != 0 || rep.Skipped != len(backups) || rep.SkippedBytes != total || rep.Newest != "" ||
		rep.VerifiedByMD5+rep.VerifiedBySHA256 != len(backups) {
		t.Errorf("second copy: %+v, %v; want every object skipped, verified", rep, err)
	}

	// 3. A byte flipped in the copy: reported with both checksums, not overwritten.
	flipped := backups[2]
	original := content(flipped.key, flipped.size, 1)
	damaged := bytes.Clone(original)
	damaged[len(damaged)/2] ^= 0x40
	if err := objectstore.PutBytes(testCtx(t), dst, flipped.key, damaged); err != nil {
		t.Fatal(err)
	}
	rep, err = run()
	if !errors.Is(err, replica.ErrDiffers) || errors.Is(err, replica.ErrIncomplete) || !strings.Contains(fmt.Sprint(err), flipped.key) {
		t.Errorf("copy after a byte flipped in %q: %v; want ErrDiffers naming it", flipped.key, err)
	}
	if len(rep.Differing) != 1 || rep.Skipped != len(backups)-1 || rep.Copied != 0 {
		t.Fatalf("copy after a byte flipped: %+v; want one differing, the rest skipped", rep)
	}
	d := rep.Differing[0]
	wantSums := func(b []byte) []byte {
		if d.Source.Algorithm == "md5" {
			h := md5.Sum(b)
			return h[:]
		}
		h := sha256.Sum256(b)
		return h[:]
	}
	if d.Key != flipped.key || d.Source.Algorithm != d.Destination.Algorithm ||
		d.Source.Size != int64(flipped.size) || d.Destination.Size != int64(flipped.size) ||
		!bytes.Equal(d.Source.Sum, wantSums(original)) || !bytes.Equal(d.Destination.Sum, wantSums(damaged)) {
		t.Errorf("difference reported: %s; want %q with the original's and the damaged copy's checksums", d, flipped.key)
	}
	if got := sum(read(t, dst, flipped.key)); got != sum(damaged) {
		t.Errorf("the damaged copy was replaced (sha256 %s)", got)
	}

	// 4. An object removed from the copy is copied again; the damaged one is still kept.
	removed := backups[5]
	if failed, err := dst.DeleteKeys(testCtx(t), []string{removed.key}); err != nil || len(failed) != 0 {
		t.Fatalf("DeleteKeys: %v %v", failed, err)
	}
	rep, err = run()
	if !errors.Is(err, replica.ErrDiffers) || rep.Copied != 1 || rep.CopiedBytes != int64(removed.size) || rep.Newest != removed.key ||
		len(rep.Differing) != 1 || rep.Skipped != len(backups)-2 || rep.ServerSide != min(serverSide, 1) {
		t.Errorf("copy after %q was removed: %+v, %v; want it copied again, the damaged one still differing", removed.key, rep, err)
	}
	want[flipped.key] = sum(damaged)
	sameContents(t, "destination at the end", contents(t, dst), union(dstOutside, want))
	sameContents(t, "source at the end", contents(t, src), srcBefore)

	// The logs said what happened, and nothing secret.
	all := strings.Join(lines(), "\n")
	for _, w := range []string{`"object differs at the destination, kept"`, `"copy done"`, `"copy finished with problems"`, flipped.key} {
		if !strings.Contains(all, w) {
			t.Errorf("no log line holds %s", w)
		}
	}
	for _, secret := range secrets {
		if strings.Contains(all, secret) {
			t.Error("a log line holds a credential")
		}
	}
}

// A destination that refuses writes (its bucket does not exist) fails with an error naming a
// key, copies nothing, creates nothing and leaves the source alone.
func testRefusedWrites(t *testing.T, ss, ds stores, secrets []string) {
	src, dst := ss.create(t, "backups-refused-"+ds.name), ds.open(t, "never-created-"+ss.name)
	srcBefore := union(put(t, src, backups, 1), put(t, src, sourceOutside, 2))
	rep, err := replica.Copy(testCtx(t), src, dst, prefix, replica.WithConcurrency(2))
	if !errors.Is(err, replica.ErrIncomplete) || !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Fatalf("copy into a missing bucket: %v; want ErrIncomplete and ErrBucketNotFound", err)
	}
	if !strings.Contains(err.Error(), prefix+"etcd-") {
		t.Errorf("the error names no key: %v", err)
	}
	for _, secret := range secrets {
		if strings.Contains(err.Error(), secret) {
			t.Error("the error holds a credential")
		}
	}
	if rep.Copied != 0 || len(rep.Failed) == 0 || len(rep.Failed) > 2 {
		t.Errorf("report: %+v; want nothing copied, one failure per worker at most", rep)
	}
	for _, f := range rep.Failed {
		if !strings.HasPrefix(f.Key, prefix) || !strings.Contains(f.Err.Error(), f.Key) {
			t.Errorf("failure %q: %v; want a key under the prefix, named in the error", f.Key, f.Err)
		}
	}
	if err := dst.List(testCtx(t), "", func([]string) error { return nil }); !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("the missing bucket after the copy: %v, want still ErrBucketNotFound", err)
	}
	sameContents(t, "source after a refused copy", contents(t, src), srcBefore)
}

// A destination that rejects the credentials fails the copy at its first key, naming it,
// copies nothing and quotes no key.
func testRejectedCredentials(t *testing.T, ss stores, dst objectstore.Store, secrets []string) {
	src := ss.create(t, "backups-rejected")
	srcBefore := put(t, src, backups, 1)
	log, lines := observed()
	rep, err := replica.Copy(testCtx(t), src, dst, prefix, replica.WithLogger(log))
	// S3 answers a HEAD signed with a wrong key with a bare 403: ErrUnauthorized.
	rejected := errors.Is(err, objectstore.ErrUnauthenticated) || errors.Is(err, objectstore.ErrUnauthorized)
	if !errors.Is(err, replica.ErrIncomplete) || !rejected || !strings.Contains(err.Error(), prefix+"etcd-") {
		t.Fatalf("copy with rejected credentials: %v; want ErrIncomplete and ErrUnauthenticated or ErrUnauthorized, naming a key", err)
	}
	if rep.Copied != 0 || len(rep.Failed) == 0 || len(rep.Failed) > replica.DefaultConcurrency {
		t.Errorf("report: %+v; want nothing copied, one failure per worker at most", rep)
	}
	all := err.Error() + strings.Join(lines(), "\n")
	for _, secret := range secrets {
		if strings.Contains(all, secret) {
			t.Error("the error or a log line quotes a secret key")
		}
	}
	sameContents(t, "source after a rejected copy", contents(t, src), srcBefore)
}

// corrupting damages what is written to some keys on its way into the store, as a faulty
// link or proxy would, unseen by the store itself.
type corrupting struct {
	objectstore.Store
	keys map[string]bool
}

func (c corrupting) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if c.keys[key] {
		r = &flipAt{r: r, at: 1000}
	}
	return c.Store.Upload(ctx, key, r)
}

// flipAt flips one bit of the byte at offset at.
type flipAt struct {
	r     io.Reader
	at, n int64
	done  bool
}

func (f *flipAt) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if !f.done && f.at >= f.n && f.at < f.n+int64(n) {
		p[f.at-f.n] ^= 1
		f.done = true
	}
	f.n += int64(n)
	return n, err
}

// An object damaged on its way to the destination fails verification, by the destination's
// MD5 or by reading it back, and is removed again; the others are copied.
func testVerifyFails(t *testing.T, ss, ds stores) {
	src, dst := ss.create(t, "backups-verify-"+ds.name), ds.create(t, "second-verify-"+ss.name)
	want := put(t, src, backups, 1)
	bad := map[string]bool{backups[0].key: true, backups[1].key: true} // above and below a part
	rep, err := replica.Copy(testCtx(t), src, corrupting{Store: dst, keys: bad}, prefix)
	if !errors.Is(err, replica.ErrIncomplete) || !errors.Is(err, replica.ErrVerifyFailed) {
		t.Errorf("copy through a damaging link: %v; want ErrIncomplete wrapping ErrVerifyFailed", err)
	}
	if rep.Copied != len(backups)-len(bad) || len(rep.Failed) != len(bad) {
		t.Errorf("report: %+v; want %d copied, %d failed", rep, len(backups)-len(bad), len(bad))
	}
	for _, f := range rep.Failed {
		if !bad[f.Key] || !errors.Is(f.Err, replica.ErrVerifyFailed) || !strings.Contains(f.Err.Error(), "removed again") {
			t.Errorf("failure %q: %v; want a damaged key failing verification, removed", f.Key, f.Err)
		}
		delete(want, f.Key)
	}
	sameContents(t, "destination after damaged writes", contents(t, dst), want)

	// The next run, over a sound link, copies them.
	rep, err = replica.Copy(testCtx(t), src, dst, prefix)
	if err != nil || rep.Copied != len(bad) {
		t.Errorf("copy over a sound link: %+v, %v; want the %d damaged ones copied", rep, err, len(bad))
	}
}

func TestSameStore(t *testing.T) {
	s, err := local.New(t.TempDir()).Open("bucket", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Copy(t.Context(), s, s, prefix); !errors.Is(err, replica.ErrSameStore) {
		t.Errorf("copy of a store onto itself: %v, want ErrSameStore", err)
	}
}

// A cancelled context stops the copy with the context's error and copies nothing more.
func TestCancelled(t *testing.T) {
	p := local.New(t.TempDir())
	src, _ := p.Open("src", nil)
	dst, _ := p.Open("dst", nil)
	for _, s := range []objectstore.Store{src, dst} {
		if err := s.Create(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	put(t, src, backups, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep, err := replica.Copy(ctx, src, dst, prefix)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, replica.ErrIncomplete) || rep.Copied != 0 {
		t.Errorf("copy with a cancelled context: %+v, %v; want context.Canceled, nothing copied", rep, err)
	}
	if keys := contents(t, dst); len(keys) != 0 {
		t.Errorf("the destination holds %v", slices.Sorted(maps.Keys(keys)))
	}
}

// A copy longer than the progress interval logs its progress, and a summary at the end.
func TestProgressLogged(t *testing.T) {
	p := local.New(t.TempDir())
	src, _ := p.Open("src", nil)
	dst, _ := p.Open("dst", nil)
	for _, s := range []objectstore.Store{src, dst} {
		if err := s.Create(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := put(t, src, backups, 1)
	log, lines := observed()
	rep, err := replica.Copy(testCtx(t), src, dst, prefix, replica.WithLogger(log), replica.WithProgressEvery(time.Millisecond), replica.WithConcurrency(1))
	if err != nil || rep.Copied != len(backups) || rep.VerifiedBySHA256 != len(backups) {
		t.Fatalf("local copy: %+v, %v; want every object copied, verified by SHA-256 (local reports no MD5)", rep, err)
	}
	sameContents(t, "destination", contents(t, dst), want)
	var progress, done int
	for _, l := range lines() {
		switch {
		case strings.Contains(l, `"copy progress"`) && strings.Contains(l, `"prefix":"`+prefix+`"`):
			progress++
		case strings.Contains(l, `"copy done"`) && strings.Contains(l, fmt.Sprintf(`"copied":%d`, len(backups))):
			done++
		}
	}
	if progress == 0 || done != 1 {
		t.Errorf("%d progress lines and %d summaries logged; want some and one", progress, done)
	}
}

// What etcd-backup-restore itself wrote (a full snapshot and deltas of a real etcd, into the
// local provider's bucket) is copied whole and matches.
func testRealBackup(t *testing.T, ds stores) {
	const entry = "shoot--dev--real--0a0b"
	root := t.TempDir()
	testenv.BackUpEtcd(t, t.TempDir(), root, "etcdbr", entry+"/etcd-main")
	src, err := local.New(root).Open("etcdbr", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := contents(t, src)
	var full, delta int
	for k := range want {
		full += strings.Count(k, "/v2/Full-")
		delta += strings.Count(k, "/v2/Incr-")
	}
	if full == 0 || delta == 0 {
		t.Fatalf("etcd-backup-restore wrote %v; want a full snapshot and a delta", slices.Sorted(maps.Keys(want)))
	}
	dst := ds.create(t, "second-copy-etcdbr")
	rep, err := replica.Copy(testCtx(t), src, dst, entry+"/")
	if err != nil || rep.Copied != len(want) {
		t.Fatalf("copy of etcd-backup-restore's backups: %+v, %v; want %d objects copied", rep, err, len(want))
	}
	sameContents(t, "the copy of etcd-backup-restore's backups", contents(t, dst), want)
	t.Logf("copied %d objects (%d full snapshots, %d deltas), %d bytes; newest %s", rep.Copied, full, delta, rep.CopiedBytes, rep.Newest)
	if _, _, ok := strings.Cut(rep.Newest, "/v2/"); !ok {
		t.Errorf("newest object copied: %q, want a snapshot", rep.Newest)
	}
}

// inFlight counts the uploads running at once through it.
type inFlight struct {
	objectstore.Store
	mu       sync.Mutex
	now, max int
}

func (f *inFlight) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	f.mu.Lock()
	f.now++
	f.max = max(f.max, f.now)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond) // long enough for the other workers to start theirs
	return f.Store.Upload(ctx, key, r)
}

// No more objects are copied at once than WithConcurrency allows, and that many are.
func TestConcurrencyBounded(t *testing.T) {
	for _, n := range []int{1, 3} {
		p := local.New(t.TempDir())
		src, _ := p.Open("src", nil)
		dst, _ := p.Open("dst", nil)
		for _, s := range []objectstore.Store{src, dst} {
			if err := s.Create(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		put(t, src, backups, 1)
		counted := &inFlight{Store: dst}
		rep, err := replica.Copy(testCtx(t), src, counted, prefix, replica.WithConcurrency(n))
		if err != nil || rep.Copied != len(backups) {
			t.Fatalf("concurrency %d: %+v, %v", n, rep, err)
		}
		if counted.max != n {
			t.Errorf("concurrency %d: %d uploads at once at most, want %d", n, counted.max, n)
		}
	}
}

// denyCopies answers every S3 CopyObject with 403 AccessDenied, as S3 does when the
// destination's credentials may not read the source bucket, and counts them.
type denyCopies struct{ copies atomic.Int32 }

func (d *denyCopies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "" {
		d.copies.Add(1)
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A destination whose server refuses the server-side copy is asked once per Copy: every object
// streams, verified as ever.
func testServerSideDenied(t *testing.T, ss stores, creds map[string][]byte) {
	src := ss.create(t, "backups-denied")
	want := put(t, src, backups, 1)
	deny := &denyCopies{}
	dst, err := s3.New(s3.WithHTTPClient(&http.Client{Transport: deny})).Open("second-denied", creds)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Create(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	log, lines := observed()
	rep, err := replica.Copy(testCtx(t), src, dst, prefix, replica.WithLogger(log), replica.WithConcurrency(3))
	if err != nil || rep.Copied != len(backups) || rep.ServerSide != 0 || rep.VerifiedByMD5 != len(backups)-1 || rep.VerifiedBySHA256 != 1 {
		t.Errorf("copy refused server-side: %+v, %v; want every object streamed and verified", rep, err)
	}
	if n := deny.copies.Load(); n != 1 {
		t.Errorf("%d server-side copies asked for; want 1, the refusal holds for the pair", n)
	}
	if all := strings.Join(lines(), "\n"); !strings.Contains(all, "no server-side copy between these stores, streaming") {
		t.Error("no log line says the copy streams")
	}
	sameContents(t, "destination", contents(t, dst), want)
}
