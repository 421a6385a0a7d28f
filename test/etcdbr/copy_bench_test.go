package etcdbr_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// BenchmarkCopy copies one backup — the backup BenchmarkDrillRestore restores, taken by
// `etcdbrctl snapshot` into a local store: a full snapshot of HOUSEKEEPER_BENCH_DRILL_MB MiB of
// values and 100 deltas — to an S3 server (versitygw) with `etcdbrctl copy` and with
// housekeeper's copier (replica.Copy, run by test/etcdbr/replicacopy), each as a process of its
// own into an empty bucket of its own, and prints the wall time, CPU seconds, memory and S3
// requests of each beside the other. Each destination must then hold every object of the
// source, byte for byte. Then, with etcd and etcdbrctl snapshot still running and idle, a few
// writes make one more delta, and the copy lag at rest is measured: from the delta's file
// landing in the local store to the end of housekeeper's run that copied and verified it
// (every other object compared, none copied); etcdbrctl copy's run after it is measured too.
// The two full copies run in one order in odd iterations and in the other in even ones.
func BenchmarkCopy(b *testing.B) {
	mb := benchMB(b)
	dir := b.TempDir()
	etcdbr := benchEtcdBR(b, "housekeeper-copy-bench-*.log")
	replicaBin := buildTestCommand(b, dir, "replicacopy")
	home, store, bucket := benchLocalStore(b, etcdbr, dir)
	entryPrefix := strings.TrimSuffix(store.Prefix, "etcd-main") // <entry>/, as the copy function copies it

	env := testenv.Start(b, testenv.WithS3())
	proxy := newCountingProxy(b, env.S3.Endpoint)
	credentials := map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(proxy.URL), s3.KeyS3ForcePathStyle: []byte("true"),
	}
	// destination is a new, empty bucket on the S3 server, reached through the proxy: as
	// etcdbrctl is configured with it and as housekeeper opens it.
	destination := func(name string) (*stack.BackupStore, objectstore.Store) {
		dst, err := s3.New().Open(name, credentials)
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.Create(context.Background()); err != nil {
			b.Fatal(err)
		}
		bs, err := etcdbr.BackupStore(s3.Type, name, store.Prefix, credentials, filepath.Join(dir, "credentials-"+name))
		if err != nil {
			b.Fatal(err)
		}
		return bs, dst
	}

	var (
		source     map[string]objectDigest // what the first copies copied
		full, rest []copyRow
		lag        copyLag
		iteration  int
		r          = rand.New(rand.NewChaCha8([32]byte{2}))
	)
	backUpForBench(b, etcdbr, store, bucket, filepath.Join(dir, "source"), mb, func(c *clientv3.Client) {
		for b.Loop() {
			iteration++
			source = digests(b, bucket, entryPrefix)
			ebs, edst := destination(fmt.Sprintf("etcdbrctl-%d", iteration))
			hbs, hdst := destination(fmt.Sprintf("housekeeper-%d", iteration))
			run := func(name string, f func() copyRow) copyRow {
				logf("%s ...", name)
				proxy.reset()
				r := f()
				r.requests = proxy.take()
				return r
			}

			// Whichever runs second may meet the S3 server still writing back the first's
			// objects: the order alternates from one iteration to the next.
			full = make([]copyRow, 2)
			copies := []func(){
				func() {
					full[0] = run("etcdbrctl copy", func() copyRow {
						return copyWithEtcdbrctl(b, etcdbr, store, ebs, filepath.Join(dir, "etcdbrctl-temp"))
					})
				},
				func() {
					full[1] = run("housekeeper's copy", func() copyRow { return copyWithReplica(b, replicaBin, home, store.Container, hbs, entryPrefix) })
				},
			}
			if iteration%2 == 0 {
				slices.Reverse(copies)
			}
			for _, f := range copies {
				f()
			}
			verifyCopy(b, full[0].tool, source, edst, entryPrefix)
			verifyCopy(b, full[1].tool, source, hdst, entryPrefix)
			full[0].copied, full[0].copiedBytes = len(source), totalSize(source) // into an empty bucket
			if got := listKeys(b, bucket, entryPrefix); len(got) != len(source) {
				b.Fatalf("the source changed while it was copied: %d objects, then %d", len(source), len(got))
			}

			// At rest: one more delta, copied as soon as it is seen.
			before := listKeys(b, bucket, entryPrefix)
			rev := writeAtRest(b, c, r, iteration)
			waitSnapshots(b, bucket, store.SnapshotPrefix(), "Incr", rev, time.Minute)
			after := listKeys(b, bucket, entryPrefix)
			added := slices.DeleteFunc(slices.Clone(after), func(k string) bool { return slices.Contains(before, k) })
			if len(added) != 1 {
				b.Fatalf("%d objects landed after %d writes at rest, want one delta: %v", len(added), 10, added)
			}
			fi, err := os.Stat(filepath.Join(home, store.Container, added[0]))
			if err != nil {
				b.Fatal(err)
			}
			lag = copyLag{key: added[0], size: fi.Size(), landed: fi.ModTime(), seen: time.Now()}
			rest = []copyRow{
				run("housekeeper's copy of the new delta", func() copyRow {
					return copyWithReplica(b, replicaBin, home, store.Container, hbs, entryPrefix)
				}),
			}
			lag.verified = time.Now()
			rest = append(rest, run("etcdbrctl copy of the new delta", func() copyRow {
				return copyWithEtcdbrctl(b, etcdbr, store, ebs, filepath.Join(dir, "etcdbrctl-temp"))
			}))
			rest[0].tool, rest[1].tool = rest[0].tool+", the new delta", rest[1].tool+", the new delta"
			now := digests(b, bucket, entryPrefix)
			verifyCopy(b, rest[0].tool, now, hdst, entryPrefix)
			verifyCopy(b, rest[1].tool, now, edst, entryPrefix)
			rest[1].copied, rest[1].copiedBytes = len(now)-len(source), totalSize(now)-totalSize(source)
			if newest := rest[0].report.Newest; newest != added[0] || rest[0].report.Copied != 1 {
				b.Errorf("housekeeper's run at rest copied %d objects, the newest %q; want the one delta %s", rest[0].report.Copied, newest, added[0])
			}

			printCopyTable(mb, iteration, source, full, rest, lag)
			b.ReportMetric(full[0].use.wall.Seconds(), "etcdbrctl-s")
			b.ReportMetric(full[1].use.wall.Seconds(), "housekeeper-s")
			b.ReportMetric(mib(full[0].use.hwm), "etcdbrctl-peak-MiB")
			b.ReportMetric(mib(full[1].use.hwm), "housekeeper-peak-MiB")
			b.ReportMetric(lag.verified.Sub(lag.landed).Seconds(), "lag-s")
		}
	})
}

// writeAtRest writes ten keys, one request each, and returns the revision of the last.
func writeAtRest(b *testing.B, c *clientv3.Client, r *rand.Rand, iteration int) int64 {
	var rev int64
	for i := range 10 {
		resp, err := c.Put(context.Background(), fmt.Sprintf("%sat-rest/%02d-%02d", benchKeyPrefix, iteration, i), fmt.Sprintf("%016x", r.Uint64()))
		if err != nil {
			b.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// copyRow is one copy, measured.
type copyRow struct {
	tool     string
	use      procUsage
	report   replica.Report // housekeeper's; etcdbrctl copy reports nothing but its log
	requests requestCount
	// etcdbrctl copy's objects copied: what its destination gained (verified).
	copied      int
	copiedBytes int64
}

// copyLag is the copy of one delta at rest: when its file was last written in the local store
// (landed), when the benchmark saw it (polling every 100 ms) and when housekeeper's run that
// copied it ended, verified.
type copyLag struct {
	key                    string
	size                   int64
	landed, seen, verified time.Time
}

// copyWithEtcdbrctl runs `etcdbrctl copy` from src to dst.
func copyWithEtcdbrctl(b *testing.B, etcdbr *stack.EtcdBR, src, dst *stack.BackupStore, tempDir string) copyRow {
	cmd, err := etcdbr.CopyCommand(context.Background(), src, dst, tempDir)
	if err != nil {
		b.Fatal(err)
	}
	row := copyRow{tool: "etcdbrctl copy (v0.44.1)"}
	if row.use, err = measure(cmd); err != nil {
		b.Fatalf("etcdbrctl copy (see its log): %v", err)
	}
	return row
}

// copyWithReplica runs test/etcdbr/replicacopy from the local bucket directory home/bucket to
// dst, and reads its Report.
func copyWithReplica(b *testing.B, bin, home, bucket string, dst *stack.BackupStore, prefix string) copyRow {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "--source-root", home, "--source-bucket", bucket,
		"--bucket", dst.Container, "--credentials", dst.CredentialsDir, "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	row := copyRow{tool: "housekeeper (objectstore/replica)"}
	var err error
	if row.use, err = measure(cmd); err != nil {
		b.Fatalf("replicacopy: %v\n%s", err, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), &row.report); err != nil {
		b.Fatalf("replicacopy printed no report: %v\n%s", err, out.String())
	}
	row.copied, row.copiedBytes = row.report.Copied, row.report.CopiedBytes
	return row
}

// objectDigest is an object's size and SHA-256.
type objectDigest struct {
	size int64
	sum  [sha256.Size]byte
}

// digests reads every object under prefix in store.
func digests(b testing.TB, store objectstore.Store, prefix string) map[string]objectDigest {
	ctx := context.Background()
	m := map[string]objectDigest{}
	for _, k := range listKeys(b, store, prefix) {
		r, err := store.Open(ctx, k)
		if err != nil {
			b.Fatalf("reading %s: %v", k, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, r)
		_ = r.Close()
		if err != nil {
			b.Fatalf("reading %s: %v", k, err)
		}
		d := objectDigest{size: n}
		h.Sum(d.sum[:0])
		m[k] = d
	}
	return m
}

func totalSize(objects map[string]objectDigest) (n int64) {
	for _, d := range objects {
		n += d.size
	}
	return n
}

// verifyCopy fails the benchmark unless dst holds under prefix exactly the objects of src, byte
// for byte (by SHA-256).
func verifyCopy(b *testing.B, tool string, src map[string]objectDigest, dst objectstore.Store, prefix string) {
	got := digests(b, dst, prefix)
	for _, k := range slices.Sorted(maps.Keys(src)) {
		if d, ok := got[k]; !ok {
			b.Errorf("%s: %s missing at the destination", tool, k)
		} else if d != src[k] {
			b.Errorf("%s: %s differs at the destination: %d bytes %x, the source's %d bytes %x", tool, k, d.size, d.sum, src[k].size, src[k].sum)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := src[k]; !ok {
			b.Errorf("%s: %s at the destination is not in the source", tool, k)
		}
	}
	logf("%s: the destination holds the source's %d objects, byte for byte", tool, len(src))
}

// requestCount is how many HTTP requests of each method reached the S3 server.
type requestCount map[string]int

func (c requestCount) total() (n int) {
	for _, v := range c {
		n += v
	}
	return n
}

func (c requestCount) String() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", m, c[m]))
	}
	return fmt.Sprintf("%d (%s)", c.total(), strings.Join(parts, ", "))
}

// countingProxy is a reverse proxy in front of the S3 server that counts the requests it
// forwards. It keeps the client's Host header, which their signatures cover.
type countingProxy struct {
	*httptest.Server
	mu     sync.Mutex
	counts requestCount
}

func newCountingProxy(b *testing.B, endpoint string) *countingProxy {
	target, err := url.Parse(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	p := &countingProxy{counts: requestCount{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[r.Method]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(p.Close)
	return p
}

func (p *countingProxy) reset() { _ = p.take() }

// take returns the counts since the last take and starts anew.
func (p *countingProxy) take() requestCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = requestCount{}
	return c
}

func printCopyTable(mb, iteration int, source map[string]objectDigest, full, rest []copyRow, lag copyLag) {
	var fullBytes int64
	deltas := 0
	for k, d := range source {
		switch s, _ := stack.ParseSnapshot(k); s.Kind {
		case "Full":
			fullBytes += d.size
		case "Incr":
			deltas++
		}
	}
	w := os.Stdout
	fmt.Fprintf(w, "\n### Copy of one backup: a full snapshot of %d MiB of values and %d deltas, local store → S3 (versitygw)\n\n", mb, deltas)
	first := "etcdbrctl copy"
	if iteration%2 == 0 {
		first = "housekeeper"
	}
	fmt.Fprintf(w, "source: %d objects, %.1f MiB stored (gzip; the full snapshot %.1f MiB); each tool copies into an empty bucket of its own; iteration %d: %s ran first\n\n",
		len(source), mib(uint64(totalSize(source))), mib(uint64(fullBytes)), iteration, first)
	fmt.Fprintln(w, "| tool | wall s | CPU s | peak RSS MiB | objects copied | bytes copied | verified | S3 requests |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|---|")
	for _, r := range append(slices.Clone(full), rest...) {
		copied, verified := strconv.Itoa(r.copied), "none (names only)"
		if strings.HasPrefix(r.tool, "housekeeper") {
			rep := r.report
			copied = fmt.Sprintf("%d (%d skipped)", rep.Copied, rep.Skipped)
			verified = fmt.Sprintf("%d (MD5 %d, SHA-256 %d)", rep.VerifiedByMD5+rep.VerifiedBySHA256, rep.VerifiedByMD5, rep.VerifiedBySHA256)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.0f | %s | %d | %s | %s |\n", r.tool, r.use.wall.Seconds(), r.use.cpu.Seconds(),
			mib(r.use.hwm), copied, r.copiedBytes, verified, r.requests)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Copy lag at rest: the delta %s (%d bytes) landed in the local store; housekeeper's run started %.2f s later (the benchmark polls every 100 ms)\n",
		filepath.Base(lag.key), lag.size, lag.seen.Sub(lag.landed).Seconds())
	fmt.Fprintf(w, "and ended with it copied and verified %.2f s after it landed.\n\n", lag.verified.Sub(lag.landed).Seconds())
	fmt.Fprintln(w, "Each tool is one process, run one after the other on the same snapshots (in the page cache for both), at its default concurrency")
	fmt.Fprintln(w, "(etcdbrctl copy: 10 snapshots at once, 5 parts each; housekeeper: 4 objects at once). Peak RSS is VmHWM sampled from /proc every 50 ms")
	fmt.Fprintln(w, "(rusage's maxrss would count the benchmark's own RSS: Linux carries it into a child's across exec); a run shorter than 50 ms shows 0.")
	fmt.Fprintln(w, "Requests are those that reached the S3 server through a counting proxy, by method. Afterwards the benchmark reads every object")
	fmt.Fprintln(w, "at both ends: each destination holds the source's objects byte for byte (SHA-256). etcdbrctl copy checks names only: it copies")
	fmt.Fprintln(w, "the snapshots whose names the destination lacks and verifies nothing it wrote; housekeeper's verified column counts the objects")
	fmt.Fprintln(w, "shown equal at both ends (copied or skipped), by the stores' MD5 or by SHA-256 of both (a local source reports no MD5).")
	fmt.Fprintln(w, "etcdbrctl copy reports no counts: its objects and bytes copied are what its destination gained.")
	fmt.Fprintln(w)
}
