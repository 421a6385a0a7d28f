package etcdbr_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const (
	// benchDeltas is how many delta snapshots follow the full one (issue 41's 100).
	benchDeltas = 100
	// benchValueBytes is each key's value: hex of random bytes, so that gzip halves it as it
	// roughly does a Kubernetes object, and no restore gets an easy ride on incompressible or
	// all-zero data.
	benchValueBytes = 8 << 10
	// A round between two deltas: this many keys overwritten, created and deleted, one request
	// (one revision) each, as kube-apiserver writes.
	roundUpdates, roundCreates, roundDeletes = 90, 10, 10
	benchKeyPrefix                           = "/registry/bench/"
)

// BenchmarkDrillRestore restores one backup — a full snapshot of HOUSEKEEPER_BENCH_DRILL_MB MiB
// of values (default 1024) and 100 deltas of writes and deletes, taken by `etcdbrctl snapshot`
// from a real etcd into a local store — with `etcdbrctl restore`, with housekeeper's drill
// (test/etcdbr/drillrestore) and with the drill as a RestoreDrill runs it in a seed: its replay,
// then etcdbrctl's restore compared with it, then the comparison with the live etcd (the source,
// still running). Each is a process of its own (etcdbrctl a child of the drill in the last),
// one after the other; it prints the wall time, CPU seconds and memory of each beside the others.
// Each must restore the source's last revision and its keys, and the whole drill must find
// etcdbrctl agreeing and the live etcd matching.
func BenchmarkDrillRestore(b *testing.B) {
	mb := benchMB(b)
	dir := b.TempDir()
	etcdbr := benchEtcdBR(b, "housekeeper-drill-bench-*.log")
	drillBin := buildTestCommand(b, dir, "drillrestore")
	home, store, bucket := benchLocalStore(b, etcdbr, dir)

	// The whole drill needs the source running: it runs while the source is at rest, once.
	var whole restoreRow
	src := backUpForBench(b, etcdbr, store, bucket, filepath.Join(dir, "source"), mb, func(c *clientv3.Client) {
		var res drill.Result
		whole, res = restoreWithDrill(b, "housekeeper drill + etcdbrctl restore + live etcd", drillBin, home, store, filepath.Join(dir, "whole"),
			"--etcdbrctl", filepath.Join(etcdbr.BinDir, "etcdbrctl"), "--live", c.Endpoints()[0])
		if res.RealRestore == nil || res.RealRestore.Outcome != drill.RealRestoreAgrees || res.Live == nil || res.Live.Outcome != backupv1alpha1.LiveMatches {
			b.Errorf("the whole drill: real restore %+v, live %+v; want Agrees and Matches", res.RealRestore, res.Live)
		}
	})
	_ = os.RemoveAll(filepath.Join(dir, "source")) // the snapshots are all the restores read

	for b.Loop() {
		theirs := restoreWithEtcdbrctl(b, etcdbr, store, filepath.Join(dir, "etcdbrctl"))
		replay, _ := restoreWithDrill(b, "housekeeper drill (functions/drill)", drillBin, home, store, filepath.Join(dir, "drill"))
		rows := []restoreRow{theirs, replay, whole}
		printRestoreTable(src, rows)
		for _, r := range rows {
			if r.revision != src.revision || r.keys != src.keys {
				b.Errorf("%s restored revision %d with %d keys; the source ended at revision %d with %d keys", r.tool, r.revision, r.keys, src.revision, src.keys)
			}
		}
		b.ReportMetric(rows[0].use.wall.Seconds(), "etcdbrctl-s")
		b.ReportMetric(rows[1].use.wall.Seconds(), "drill-s")
		b.ReportMetric(float64(rows[0].use.maxRSS)/(1<<20), "etcdbrctl-peak-MiB")
		b.ReportMetric(float64(rows[1].use.maxRSS)/(1<<20), "drill-peak-MiB")
		b.ReportMetric(rows[2].use.wall.Seconds(), "whole-drill-s")
		b.ReportMetric(float64(rows[2].use.maxRSS)/(1<<20), "whole-drill-peak-MiB")
	}
}

// benchMB is HOUSEKEEPER_BENCH_DRILL_MB, the MiB of values of the benchmarks' full snapshot
// (default 1024).
func benchMB(b *testing.B) int {
	mb := testenv.EnvInt(b, "HOUSEKEEPER_BENCH_DRILL_MB", 1024)
	// StartEtcd's etcd has etcd's default backend quota of 2 GiB; the minimum leaves a half of
	// the keys for the rounds' updates and the other half for their deletes.
	if mb < 16 || mb > 1536 {
		b.Fatalf("HOUSEKEEPER_BENCH_DRILL_MB=%d: from 16 to 1536 (the source etcd's 2 GiB quota)", mb)
	}
	return mb
}

// benchEtcdBR runs the pinned etcd and etcdbrctl as this process's user, their logs in a file
// named by pattern (os.CreateTemp's), kept if the benchmark fails.
func benchEtcdBR(b *testing.B, pattern string) *stack.EtcdBR {
	logs, err := os.CreateTemp("", pattern)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = logs.Close()
		if !b.Failed() {
			_ = os.Remove(logs.Name())
		}
	})
	logf("etcd's and etcdbrctl's logs: %s (kept if the benchmark fails)", logs.Name())
	etcdbr, err := stack.NewEtcdBR(logs)
	if err != nil {
		b.Fatal(err)
	}
	return etcdbr
}

// benchLocalStore is the local store of the benchmarks' backup under dir/store: its home (the
// directory holding the bucket directory), etcdbrctl's configuration of it and the bucket.
func benchLocalStore(b *testing.B, etcdbr *stack.EtcdBR, dir string) (string, *stack.BackupStore, objectstore.Store) {
	home := filepath.Join(dir, "store")
	store, err := etcdbr.BackupStore(local.Type, "bench", "shoot--bench--drill/etcd-main",
		map[string][]byte{local.KeyHostPath: []byte(home)}, filepath.Join(dir, "credentials"))
	if err != nil {
		b.Fatal(err)
	}
	// The bucket directory exists before etcdbrctl runs, as etcd-druid's hostPath volume does.
	if err := os.MkdirAll(filepath.Join(home, store.Container), 0o700); err != nil {
		b.Fatal(err)
	}
	bucket, err := local.New(home).Open(store.Container, nil)
	if err != nil {
		b.Fatal(err)
	}
	return home, store, bucket
}

// buildTestCommand builds test/etcdbr/<name> into dir.
func buildTestCommand(b *testing.B, dir, name string) string {
	root, err := stack.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, "./test/etcdbr/"+name)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building test/etcdbr/%s: %v\n%s", name, err, out)
	}
	return bin
}

// benchSource is what the backed-up etcd held at its last write, and what backing it up took.
type benchSource struct {
	mb                         int
	revision, keys             int64
	write, fullWait, deltaWait time.Duration
	fullBytes                  int64
	deltas                     int
	deltaBytes                 int64
}

// backUpForBench runs etcd in dataDir, writes mb MiB of values into it, starts `etcdbrctl
// snapshot` (its full snapshot is taken at start) and then writes rounds of updates, creations
// and deletes until benchDeltas deltas are saved, each round waiting for the delta that covers
// it. Then atRest, if not nil, runs with both still running and idle, given a client of the
// etcd. It stops both and returns what the source held at its last write.
func backUpForBench(b *testing.B, etcdbr *stack.EtcdBR, store *stack.BackupStore, bucket objectstore.Store, dataDir string, mb int,
	atRest func(*clientv3.Client)) benchSource {
	ctx := context.Background()
	src := benchSource{mb: mb}
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dataDir, "new.etcd"))
	if err != nil {
		b.Fatal(err)
	}
	etcd, err := etcdbr.StartEtcd(member)
	if err != nil {
		b.Fatal(err)
	}
	defer etcd.Stop()
	c := benchClient(b, member)
	defer c.Close()

	start := time.Now()
	keys := fill(ctx, b, c, mb)
	src.write = time.Since(start)
	rev := sourceState(ctx, b, c).revision
	logf("wrote %d MiB of values in %d keys in %s, revision %d", mb, keys, src.write.Round(time.Millisecond), rev)

	opts := snapshotOptions
	opts.TempDir = filepath.Join(dataDir, "temp")
	start = time.Now()
	snapshotter, err := etcdbr.StartSnapshotter(etcd, store, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer snapshotter.Stop()
	waitSnapshots(b, bucket, store.SnapshotPrefix(), "Full", rev, 30*time.Minute)
	src.fullWait = time.Since(start)
	logf("full snapshot up to revision %d saved in %s", rev, src.fullWait.Round(time.Millisecond))

	start = time.Now()
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	for round, saved := 0, 0; saved < benchDeltas; round++ {
		rev = writeRound(ctx, b, c, r, round, keys)
		saved = waitSnapshots(b, bucket, store.SnapshotPrefix(), "Incr", rev, time.Minute)
	}
	src.deltaWait = time.Since(start)
	if atRest != nil {
		atRest(c)
	}
	st := sourceState(ctx, b, c)
	src.revision, src.keys = st.revision, st.keys
	snapshotter.Stop()
	etcd.Stop()

	// What the restores read: the objects of the prefix after the snapshotter stopped.
	var full []string
	for _, k := range listKeys(b, bucket, store.SnapshotPrefix()) {
		s, ok := stack.ParseSnapshot(k)
		if !ok {
			continue
		}
		size := fileSize(b, filepath.Join(store.Home, store.Container, k))
		if s.Kind == "Full" {
			src.fullBytes = size
			full = append(full, k)
		} else {
			src.deltas++
			src.deltaBytes += size
		}
	}
	if len(full) != 1 {
		b.Fatalf("%d full snapshots %v, want the one taken at start", len(full), full)
	}
	logf("%d deltas up to revision %d saved in %s; the source ends with %d keys", src.deltas, src.revision, src.deltaWait.Round(time.Millisecond), src.keys)
	return src
}

func benchClient(b *testing.B, m *stack.EtcdMember) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// fill writes mb MiB of values into keys benchKey(0..n-1), 64 puts a transaction (512 KiB, under
// etcd's 1.5 MiB request limit), four transactions at a time: the full snapshot's content, written
// fast; how it got there does not matter to a restore. It returns n.
func fill(ctx context.Context, b *testing.B, c *clientv3.Client, mb int) int {
	const perTxn, writers = 64, 4
	n := mb << 20 / benchValueBytes
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(writers)
	for from := 0; from < n; from += perTxn {
		g.Go(func() error {
			r := rand.New(rand.NewChaCha8([32]byte{byte(from), byte(from >> 8), byte(from >> 16)}))
			var ops []clientv3.Op
			for i := from; i < min(from+perTxn, n); i++ {
				ops = append(ops, clientv3.OpPut(benchKey(i), benchValue(r)))
			}
			_, err := c.Txn(ctx).Then(ops...).Commit()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("writing %d MiB: %v", mb, err)
	}
	return n
}

// writeRound writes one round between deltas, one request each: roundUpdates of the first half
// of the keys overwritten, roundCreates new keys, roundDeletes of the second half deleted (each
// key once over all rounds). It returns the revision of its last write.
func writeRound(ctx context.Context, b *testing.B, c *clientv3.Client, r *rand.Rand, round, keys int) int64 {
	var rev int64
	put := func(key string) {
		resp, err := c.Put(ctx, key, benchValue(r))
		if err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		rev = resp.Header.Revision
	}
	for i := range roundUpdates {
		put(benchKey((round*roundUpdates + i) % (keys / 2)))
	}
	for i := range roundCreates {
		put(fmt.Sprintf("%snew/%04d-%02d", benchKeyPrefix, round, i))
	}
	for i := range roundDeletes {
		k := keys/2 + round*roundDeletes + i
		if k >= keys {
			b.Fatalf("round %d: no key left to delete among %d", round, keys)
		}
		resp, err := c.Delete(ctx, benchKey(k))
		if err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

func benchKey(i int) string { return fmt.Sprintf("%s%08d", benchKeyPrefix, i) }

func benchValue(r *rand.Rand) string {
	raw := make([]byte, benchValueBytes/2)
	for i := 0; i < len(raw); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(raw); j++ {
			raw[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.EncodeToString(raw)
}

type storeState struct{ revision, keys int64 }

// sourceState is the store's revision and how many keys it holds, as the drill reads them.
func sourceState(ctx context.Context, b *testing.B, c *clientv3.Client) storeState {
	resp, err := c.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return storeState{revision: resp.Header.Revision, keys: resp.Count}
}

// waitSnapshots waits until a snapshot of kind under prefix covers revision and returns how many
// of that kind are saved.
func waitSnapshots(b *testing.B, bucket objectstore.Store, prefix, kind string, revision int64, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		n, covered := 0, false
		for _, k := range listKeys(b, bucket, prefix) {
			if s, ok := stack.ParseSnapshot(k); ok && s.Kind == kind {
				n++
				covered = covered || s.LastRevision >= revision
			}
		}
		if covered {
			return n
		}
		if time.Now().After(deadline) {
			b.Fatalf("no %s snapshot under %s up to revision %d within %s (%d saved)", kind, prefix, revision, timeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func listKeys(b testing.TB, bucket objectstore.Store, prefix string) []string {
	var keys []string
	if err := bucket.List(context.Background(), prefix, func(page []string) error {
		keys = append(keys, page...)
		return nil
	}); err != nil {
		b.Fatalf("listing %q: %v", prefix, err)
	}
	return keys
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// restoreRow is one restore, measured.
type restoreRow struct {
	tool           string
	use            procUsage
	revision, keys int64
}

// restoreWithEtcdbrctl runs `etcdbrctl restore` into dir and reads the revision and key count of
// what it restored from an etcd started on it afterwards (not measured).
func restoreWithEtcdbrctl(b *testing.B, etcdbr *stack.EtcdBR, store *stack.BackupStore, dir string) restoreRow {
	defer os.RemoveAll(dir)
	ctx := context.Background()
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "data", "new.etcd"))
	if err != nil {
		b.Fatal(err)
	}
	cmd, err := etcdbr.RestoreCommand(ctx, store, member, filepath.Join(dir, "data", "temp"))
	if err != nil {
		b.Fatal(err)
	}
	row := restoreRow{tool: "etcdbrctl restore (v0.44.1)"}
	logf("etcdbrctl restore ...")
	if row.use, err = measure(cmd); err != nil {
		b.Fatalf("etcdbrctl restore: %v", err)
	}
	etcd, err := etcdbr.StartEtcd(member)
	if err != nil {
		b.Fatal(err)
	}
	defer etcd.Stop()
	c := benchClient(b, member)
	defer c.Close()
	st := sourceState(ctx, b, c)
	row.revision, row.keys = st.revision, st.keys
	return row
}

// restoreWithDrill runs test/etcdbr/drillrestore with its work directory in dir and the flags
// extra (none: the replay alone); the drill reads the restored revision and keys itself.
func restoreWithDrill(b *testing.B, tool, bin, home string, store *stack.BackupStore, dir string, extra ...string) (restoreRow, drill.Result) {
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--root", home, "--bucket", store.Container, "--prefix", store.Prefix + "/", "--work-dir", dir}, extra...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	row := restoreRow{tool: tool}
	logf("%s ...", tool)
	var err error
	if row.use, err = measure(cmd); err != nil {
		b.Fatalf("drillrestore: %v\n%s", err, errOut.String())
	}
	var res drill.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		b.Fatalf("drillrestore printed no result: %v\n%s", err, out.String())
	}
	row.revision, row.keys = res.Revision, res.Keys
	return row, res
}

// procUsage is what one process and the processes it starts spent (the drill restores in
// processes of its own): wall time from start to exit, user + system CPU, the peak RSS of the
// largest of them as the kernel counts it (rusage), and the peaks of their anonymous and
// file-backed resident memory together, sampled from /proc (the latter is bbolt's mmap of the
// db: page cache the kernel reclaims under pressure, not memory the process holds). rusage's peak is at least
// this process's own at the child's exec (Linux carries the old address space's high-water mark
// into it); hwm, the last VmHWM sampled, is the child's own and its children's (missing what
// they reached in their last 50 ms, or all of it when they ran for less).
type procUsage struct {
	wall, cpu                       time.Duration
	maxRSS, peakAnon, peakFile, hwm uint64 // bytes
}

// measure runs cmd to its end and measures it, sampling /proc/<pid>/status every 50 ms.
func measure(cmd *exec.Cmd) (procUsage, error) {
	var u procUsage
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return u, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if anon, file, hwm, ok := treeMemory(cmd.Process.Pid); ok {
				u.peakAnon, u.peakFile, u.hwm = max(u.peakAnon, anon), max(u.peakFile, file), max(u.hwm, hwm)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	u.wall = time.Since(start)
	close(done)
	wg.Wait()
	if cmd.ProcessState != nil {
		u.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.maxRSS = uint64(ru.Maxrss) << 10 // KiB on Linux
		}
	}
	return u, err
}

// treeMemory is residentMemory of pid and every process it started, summed; ok is false once
// pid is gone.
func treeMemory(pid int) (anon, file, hwm uint64, ok bool) {
	if anon, file, hwm, ok = residentMemory(pid); !ok {
		return 0, 0, 0, false
	}
	// Each thread lists the children it forked.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		children, _ := os.ReadFile(task)
		for _, c := range strings.Fields(string(children)) {
			if child, err := strconv.Atoi(c); err == nil {
				a, f, h, _ := treeMemory(child)
				anon, file, hwm = anon+a, file+f, hwm+h
			}
		}
	}
	return anon, file, hwm, true
}

// residentMemory reads RssAnon, RssFile + RssShmem and VmHWM of pid; ok is false once it is
// gone.
func residentMemory(pid int) (anon, file, hwm uint64, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "RssAnon":
			anon, ok = kb<<10, true
		case "RssFile", "RssShmem":
			file += kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return anon, file, hwm, ok
}

func printRestoreTable(src benchSource, rows []restoreRow) {
	w := os.Stdout
	fmt.Fprintf(w, "\n### Restore of one backup: a full snapshot of %d MiB of values and %d deltas\n\n", src.mb, src.deltas)
	fmt.Fprintf(w, "source: revision %d, %d keys; full snapshot: %.1f MiB stored (gzip); %d deltas: %.1f MiB stored; written in %s, full snapshot saved %s after etcdbrctl started, the deltas' rounds took %s\n\n",
		src.revision, src.keys, mib(uint64(src.fullBytes)), src.deltas, mib(uint64(src.deltaBytes)),
		src.write.Round(time.Second), src.fullWait.Round(time.Second), src.deltaWait.Round(time.Second))
	fmt.Fprintln(w, "| tool | wall s | CPU s | peak RSS MiB | peak RssAnon MiB | peak RssFile MiB | restored revision | keys |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.0f | %.0f | %.0f | %d | %d |\n", r.tool, r.use.wall.Seconds(), r.use.cpu.Seconds(),
			mib(r.use.maxRSS), mib(r.use.peakAnon), mib(r.use.peakFile), r.revision, r.keys)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each tool is one process and those it starts (the drill restores and serves the db in processes of its own), run one after the other on the same snapshots (in the page cache for both). Peak RSS is the kernel's (rusage maxrss: the largest process's);")
	fmt.Fprintln(w, "RssAnon and RssFile (file-backed, mostly bbolt's mmap of the db: reclaimable page cache) are peaks of the processes together, sampled from /proc/<pid>/status every 50 ms.")
	fmt.Fprintln(w, "etcdbrctl's revision and keys are read from an etcd started on its data directory afterwards; the drill's row includes its own checks (digest of every key, HashKV).")
	fmt.Fprintln(w, "The whole drill ran first, with the source at rest; etcdbrctl is one of its processes.")
	fmt.Fprintln(w)
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// logf prints progress to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
