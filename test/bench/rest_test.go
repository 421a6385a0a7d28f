package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// BenchmarkAtRest measures what housekeeper costs while nothing happens, and how long a single
// change takes, beside upstream provider-local's BackupBucket and BackupEntry controllers run
// as a process (test/bench/upstream), on one kube-apiserver holding restEntries converged
// BackupEntries (with their namespaces, credentials and etcd-backup secrets) and restSecrets
// unrelated secrets of 1 KiB:
//
//   - cold start: a function exec'd with one event waiting in its consumer, until the event is
//     settled, by phase (the process's own "cold start" line); upstream: exec until its first
//     reconcile has converged an entry. restStarts starts each.
//   - idle: RSS, CPU seconds and API requests per minute of every always-on process over
//     restIdle with nothing happening: the bridge and nats-server, beside upstream's process.
//   - scale from zero: restKEDA purges coming due with the purge function at zero, KEDA's own
//     scaler polled at the chart's pollingInterval waking it (keda_test.go).
//   - latency at rest: restSerial entries one at a time, create → Succeeded with etcd-backup
//     and delete → gone, each side warm and without client limits.
//
// Run it alone:
//
//	go test -run '^$' -bench BenchmarkAtRest -benchtime 1x -timeout 60m ./test/bench/
//
// HOUSEKEEPER_BENCH_REST_ENTRIES, _REST_SECRETS, _REST_STARTS, _REST_KEDA, _REST_IDLE and _REST_SERIAL
// scale it down for a trial.
func BenchmarkAtRest(b *testing.B) {
	var (
		entries = testenv.EnvInt(b, "HOUSEKEEPER_BENCH_REST_ENTRIES", 5000)
		secrets = testenv.EnvInt(b, "HOUSEKEEPER_BENCH_REST_SECRETS", 10000)
		starts  = testenv.EnvInt(b, "HOUSEKEEPER_BENCH_REST_STARTS", 20)
		serialN = testenv.EnvInt(b, "HOUSEKEEPER_BENCH_REST_SERIAL", 100)
		idle    = testenv.EnvDuration(b, "HOUSEKEEPER_BENCH_REST_IDLE", 5*time.Minute)
		kedaN   = testenv.EnvInt(b, "HOUSEKEEPER_BENCH_REST_KEDA", 5)
	)
	for b.Loop() {
		w := startRestWorld(b)
		w.populate(b, entries, secrets)

		fmt.Printf("\n### At rest: %d BackupEntries, %d unrelated secrets on the server\n", entries, secrets)
		cold := []coldStarts{w.coldStartFunction(b, "bucket", starts), w.coldStartFunction(b, "entry", starts)}
		cold = append(cold, w.coldStartFunction(b, "purge", starts), w.coldStartUpstream(b, starts))
		printColdStarts(os.Stdout, cold)
		fromZero, interval := w.scaleFromZeroPurge(b, kedaN, 5*time.Second)
		printFromZero(os.Stdout, kedaN, interval, fromZero)

		up := w.startUpstream(b, true)
		w.printIdle(b, os.Stdout, up, idle)
		upLatency := w.serial(b, "lat-up", serialN)
		up.Stop()
		w.startFunctions(b, "bucket", "entry", "purge")
		hkLatency := w.serial(b, "lat-hk", serialN)
		w.stopFunctions()
		printLatency(os.Stdout, serialN, hkLatency, upLatency)
	}
}

// restWorld is the at-rest benchmark's world: the env, one nats-server process with the
// streams, the bridge (leader-elected, as deployed) and the functions it runs.
type restWorld struct {
	e        *env
	nats     *stack.NATSCluster
	js       jetstream.JetStream
	hk       stack.Housekeeper
	bridge   *restProc
	upstream string // the upstream binary
	running  map[string]*restProc
	seq      int
	bucket   string // the world's BackupBucket
	// coldEntries are the entries the entry function's cold starts created, which the purge's
	// delete.
	coldEntries []string
}

// restProc is a process of the world: exec'd at exec, logging to log.
type restProc struct {
	*stack.Served
	log  string
	exec time.Time
}

func startRestWorld(b *testing.B) *restWorld {
	e := startEnv(b)
	w := &restWorld{e: e, running: map[string]*restProc{}, bucket: "bench-world", upstream: buildUpstream(b, e)}
	dir := filepath.Join(e.logDir, "rest-nats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var err error
	w.nats, err = stack.StartNATSCluster(dir, 1, "", func(name string) io.Writer { return e.file(b, "rest-nats-"+name+".log") })
	if err != nil {
		b.Fatalf("nats-server: %v", err)
	}
	b.Cleanup(w.nats.Stop)
	nc, err := nats.Connect(w.nats.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	if w.js, err = jetstream.New(nc); err != nil {
		b.Fatal(err)
	}
	w.hk = stack.Housekeeper{Bin: e.binDir, Env: []string{
		"HOUSEKEEPER_NATS_URL=" + w.nats.URL,
		"HOUSEKEEPER_KUBECONFIG=" + e.kubecfg,
		"HOUSEKEEPER_CLUSTER=bench-rest",
		"HOUSEKEEPER_TYPES=local",
	}}
	if err := w.hk.Setup(context.Background(), e.file(b, "rest-setup.log"), "--stream-replicas", "1"); err != nil {
		b.Fatal(err)
	}
	if err := ensureGardenNamespace(context.Background(), e.driver); err != nil {
		b.Fatal(err)
	}
	w.bridge = w.startBridge(b, "bridge", "bench")
	b.Cleanup(func() { w.bridge.Stop() })
	if err := w.bridge.AwaitReady(time.Minute); err != nil {
		b.Fatal(err)
	}
	return w
}

// startBridge execs a bridge replica as deployed (leader-elected, without client limits) as
// the process name, identity its name in the Lease.
func (w *restWorld) startBridge(b *testing.B, name, identity string) *restProc {
	return w.start(b, name, w.hk.Bridge("--leader-elect=true", "--leader-election-identity="+identity, "--kube-qps", "-1",
		"--resync-period", benchResyncPeriod.String())...)
}

// benchResyncPeriod is the bridges' --resync-period here: short enough for BenchmarkRestart to
// measure one resync.
const benchResyncPeriod = time.Minute

// start execs args as the process name, with a free --addr.
func (w *restWorld) start(b *testing.B, name string, args ...string) *restProc {
	b.Helper()
	w.seq++
	logName := fmt.Sprintf("rest-%03d-%s.log", w.seq, name)
	p, at, err := w.e.exec(name, w.hk.Command(w.e.file(b, logName), args...))
	if err != nil {
		b.Fatal(err)
	}
	return &restProc{Served: p, log: filepath.Join(w.e.logDir, logName), exec: at}
}

// function execs housekeeper's function fn as deployed, without client limits.
func (w *restWorld) function(b *testing.B, fn string) *restProc {
	args := w.hk.Function(fn, "--local-root", w.e.root, "--kube-qps", "-1")
	if fn != "bucket" {
		args = append(args, "--retention", "0s")
	}
	return w.start(b, fn, args...)
}

func (w *restWorld) startFunctions(b *testing.B, fns ...string) {
	for _, fn := range fns {
		p := w.function(b, fn)
		w.running[fn] = p
		if err := p.AwaitReady(time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

func (w *restWorld) stopFunctions() {
	for fn, p := range w.running {
		p.Stop()
		delete(w.running, fn)
	}
}

// populate converges entries BackupEntries through housekeeper (a real world: namespaces,
// credentials with finalizers, etcd-backup secrets) and adds secrets unrelated secrets.
func (w *restWorld) populate(b *testing.B, entries, secrets int) {
	ctx := context.Background()
	w.startFunctions(b, "bucket", "entry")
	p := newPhaseObjects("world", entries)
	p.bucket = w.bucket
	w.e.obs.track(p.entries)
	logf("rest: creating the inputs of %d entries", entries)
	if err := createInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	if err := deployBucket(ctx, w.e.driver, p, 2*time.Minute); err != nil {
		b.Fatal(err)
	}
	logf("rest: converging %d BackupEntries", entries)
	if err := parallel(entries, driverWorkers, func(i int) error {
		return w.e.driver.Create(ctx, newEntry(p.entries[i], p.bucket))
	}); err != nil {
		b.Fatal(err)
	}
	budget, _ := waitBudget(entries)
	if err := w.awaitEntries(p.entries, budget, "converged", func(o entryObs) bool { return !o.converged.IsZero() }); err != nil {
		b.Fatal(err)
	}
	logf("rest: creating %d unrelated secrets", secrets)
	payload := []byte(strings.Repeat("x", 1024))
	const perNamespace = 100
	for ns := 0; ns*perNamespace < secrets; ns++ {
		if err := w.e.driver.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", ns)}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := parallel(secrets, driverWorkers, func(i int) error {
		return w.e.driver.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i), Namespace: fmt.Sprintf("unrelated-%d", i/perNamespace)},
			Data:       map[string][]byte{"tls.key": payload},
		})
	}); err != nil {
		b.Fatal(err)
	}
	for _, fn := range []string{"bucket", "entry"} {
		if err := w.drained(fn, 2*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	w.stopFunctions()
}

// awaitEntries waits until done holds for every named entry.
func (w *restWorld) awaitEntries(names []string, budget time.Duration, what string, done func(entryObs) bool) error {
	end := time.Now().Add(budget)
	next := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, o := range w.e.obs.snapshot(names) {
			if done(o) {
				n++
			}
		}
		if n == len(names) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s", notConverged(w.e, names, budget, false, what, done))
		}
		if time.Now().After(next) && len(names) > 1 {
			logf("rest: %s %d/%d", what, n, len(names))
			next = time.Now().Add(10 * time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pending is what fn's consumer has not delivered, and what it delivered unacknowledged.
func (w *restWorld) pending(fn string) (uint64, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := w.js.Consumer(ctx, events.RecordStream, fn)
	if err != nil {
		return 0, 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	return info.NumPending, info.NumAckPending, nil
}

// awaitWaiting waits until fn's consumer holds an event nobody has taken.
func (w *restWorld) awaitWaiting(fn string, timeout time.Duration) error {
	return stack.Poll(timeout, 10*time.Millisecond, "an event waiting for "+fn, func() (bool, string, error) {
		n, acks, err := w.pending(fn)
		return n > 0, fmt.Sprintf("%d pending, %d unacknowledged", n, acks), err
	})
}

// drained waits until fn's consumer has nothing pending or unacknowledged.
func (w *restWorld) drained(fn string, timeout time.Duration) error {
	return stack.Poll(timeout, 20*time.Millisecond, fn+"'s consumer drained", func() (bool, string, error) {
		n, acks, err := w.pending(fn)
		return n == 0 && acks == 0, fmt.Sprintf("%d pending, %d unacknowledged", n, acks), err
	})
}

// coldStartPhases are the phases of process.Startup, in order.
var coldStartPhases = []string{"kube_client", "nats_connect", "streams_checked", "function_built", "consumer_bound", "first_fetch", "first_event_settled"}

// coldStarts are one implementation's starts.
type coldStarts struct {
	label string
	// total is exec → the event settled (housekeeper) or → the first reconcile's entry
	// converged as the observer saw it (upstream).
	total []time.Duration
	// converged is exec → the object converged as the observer saw it (entry: Succeeded and
	// etcd-backup; bucket: Succeeded), nil where not observed.
	converged []time.Duration
	phases    map[string][]time.Duration // init (exec → the process kernel's start) and coldStartPhases
}

// coldStartFunction starts fn n times, each time with one new event waiting.
func (w *restWorld) coldStartFunction(b *testing.B, fn string, n int) coldStarts {
	ctx := context.Background()
	res := coldStarts{label: "housekeeper " + fn, phases: map[string][]time.Duration{}}
	var p phaseObjects
	switch fn {
	case "entry":
		p = newPhaseObjects("cold-entry", n)
		p.bucket = w.bucket
		w.e.obs.track(p.entries)
		if err := createInputs(ctx, w.e.driver, p); err != nil {
			b.Fatal(err)
		}
		w.coldEntries = p.entries
	case "purge":
		// The entries the entry's cold starts created go, one at a time, the entry function
		// warm: each deletion schedules a purge (retention 2 s, since deletionTimestamp has
		// whole seconds: an entry due at once the entry function purges itself).
		if len(w.coldEntries) < n {
			b.Fatalf("purge: %d entries of the entry's cold starts to delete, want %d", len(w.coldEntries), n)
		}
		w.startFunctions(b, "entry")
		defer w.stopFunctions()
	}
	logf("rest: %d cold starts of %s", n, fn)
	for i := 0; i < n; i++ {
		var (
			converged func() (time.Time, bool)
			name      string
		)
		switch fn {
		case "bucket":
			name = fmt.Sprintf("cold-bucket-%d", i)
			if err := w.e.driver.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + name, Namespace: gardenNamespace},
				Data: map[string][]byte{"token": []byte("bench")}}); err != nil {
				b.Fatal(err)
			}
			if err := w.e.driver.Create(ctx, newBucket(name)); err != nil {
				b.Fatal(err)
			}
			converged = func() (time.Time, bool) { return w.bucketSucceeded(name) }
		case "entry":
			name = p.entries[i]
			if err := w.e.driver.Create(ctx, newEntry(name, p.bucket)); err != nil {
				b.Fatal(err)
			}
			converged = func() (time.Time, bool) {
				o := w.e.obs.snapshot([]string{name})[0]
				return o.converged, !o.converged.IsZero()
			}
		case "purge":
			name = w.coldEntries[i]
			retention := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"2s"}}}`, entry.AnnotationRetention))
			if err := w.e.driver.Patch(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}, retention); err != nil {
				b.Fatal(err)
			}
			if err := deleteExtensionObject(ctx, w.e.driver, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.awaitWaiting(fn, 30*time.Second); err != nil {
			b.Fatalf("%s start %d: %v", fn, i, err)
		}
		proc := w.function(b, fn)
		line, err := awaitColdStart(proc, 30*time.Second)
		if err != nil {
			proc.Stop()
			b.Fatalf("%s start %d: %v", fn, i, err)
		}
		total, phases, err := line.phases(proc.exec)
		if err != nil {
			b.Fatalf("%s start %d: %v", fn, i, err)
		}
		res.total = append(res.total, total)
		for k, v := range phases {
			res.phases[k] = append(res.phases[k], v)
		}
		if converged != nil {
			if err := stack.Poll(30*time.Second, 5*time.Millisecond, name+" converged", func() (bool, string, error) {
				_, ok := converged()
				return ok, "", nil
			}); err != nil {
				b.Fatalf("%s start %d: %v", fn, i, err)
			}
			at, _ := converged()
			res.converged = append(res.converged, at.Sub(proc.exec))
		}
		if err := w.drained(fn, 30*time.Second); err != nil {
			b.Fatalf("%s start %d: %v", fn, i, err)
		}
		proc.Stop()
	}
	return res
}

// bucketSucceeded says whether the bucket's lastOperation is Succeeded for its generation,
// and when that was written.
func (w *restWorld) bucketSucceeded(name string) (time.Time, bool) {
	bb := &extensionsv1alpha1.BackupBucket{}
	if err := w.e.driver.Get(context.Background(), client.ObjectKey{Name: name}, bb); err != nil {
		return time.Time{}, false
	}
	op := bb.Status.LastOperation
	if op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded || bb.Status.ObservedGeneration != bb.Generation {
		return time.Time{}, false
	}
	return time.Now(), true
}

// coldStartUpstream starts upstream's process n times (without leader election, which would
// add the wait for the lease), each time with one new BackupEntry waiting.
func (w *restWorld) coldStartUpstream(b *testing.B, n int) coldStarts {
	ctx := context.Background()
	res := coldStarts{label: "upstream provider-local", phases: map[string][]time.Duration{}}
	p := newPhaseObjects("cold-up", n)
	p.bucket = w.bucket
	w.e.obs.track(p.entries)
	if err := createInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	logf("rest: %d cold starts of upstream's process", n)
	for i, name := range p.entries {
		if err := w.e.driver.Create(ctx, newEntry(name, p.bucket)); err != nil {
			b.Fatal(err)
		}
		proc := w.startUpstreamProc(b, false)
		if err := w.awaitEntries([]string{name}, time.Minute, "converged", func(o entryObs) bool { return !o.converged.IsZero() || proc.Exited() }); err != nil || proc.Exited() {
			proc.Stop()
			b.Fatalf("upstream start %d: %v (exited: %t, log %s)", i, err, proc.Exited(), proc.log)
		}
		d := w.e.obs.snapshot([]string{name})[0].converged.Sub(proc.exec)
		res.total = append(res.total, d)
		res.converged = append(res.converged, d)
		proc.Stop()
	}
	return res
}

func (w *restWorld) startUpstreamProc(b *testing.B, leaderElect bool) *restProc {
	return w.start(b, "upstream", w.upstream, "--kubeconfig", w.e.kubecfg, "--root", w.e.root, "--leader-elect="+strconv.FormatBool(leaderElect))
}

// startUpstream starts upstream's process as deployed (leader election on) and has it
// reconcile one entry, so that its caches are those of a process that has worked (the secrets
// informer starts on the first secret read).
func (w *restWorld) startUpstream(b *testing.B, leaderElect bool) *restProc {
	ctx := context.Background()
	proc := w.startUpstreamProc(b, leaderElect)
	p := newPhaseObjects("warm-up", 1)
	p.bucket = w.bucket
	w.e.obs.track(p.entries)
	if err := createInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	if err := w.e.driver.Create(ctx, newEntry(p.entries[0], p.bucket)); err != nil {
		b.Fatal(err)
	}
	if err := w.awaitEntries(p.entries, time.Minute, "converged", func(o entryObs) bool { return !o.converged.IsZero() }); err != nil {
		proc.Stop()
		b.Fatal(err)
	}
	return proc
}

// coldStartLine is a process's "cold start" log line.
type coldStartLine map[string]any

// awaitColdStart waits for p's "cold start" line.
func awaitColdStart(p *restProc, timeout time.Duration) (coldStartLine, error) {
	end := time.Now().Add(timeout)
	for {
		if line, ok := readColdStart(p.log); ok {
			return line, nil
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("%s exited before its cold start line: %v (log %s)", p.Name, p.State(), p.log)
		default:
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("%s logged no cold start line within %s (log %s)", p.Name, timeout, p.log)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readColdStart(path string) (coldStartLine, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"msg":"cold start"`) {
			continue
		}
		var line coldStartLine
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			return line, true
		}
	}
	return nil, false
}

// phases are exec → settled and each phase, init being exec → the process kernel's start.
func (l coldStartLine) phases(exec time.Time) (time.Duration, map[string]time.Duration, error) {
	seconds := func(k string) (time.Duration, error) {
		v, ok := l[k].(float64)
		if !ok {
			return 0, fmt.Errorf("cold start line without %s: %v", k, l)
		}
		return time.Duration(v * float64(time.Second)), nil
	}
	started, ok := l["started_at_unix_nano"].(float64)
	if !ok {
		return 0, nil, fmt.Errorf("cold start line without started_at_unix_nano: %v", l)
	}
	out := map[string]time.Duration{"init": time.Unix(0, int64(started)).Sub(exec)}
	for _, k := range coldStartPhases {
		d, err := seconds(k)
		if err != nil {
			return 0, nil, err
		}
		out[k] = d
	}
	total, err := seconds("total")
	if err != nil {
		return 0, nil, err
	}
	return out["init"] + total, out, nil
}

func printColdStarts(w io.Writer, all []coldStarts) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(w, "\n| cold start, ms (p50 / p99 of %d) | exec → event settled (upstream: → first reconcile converged) | exec → object converged, observed |", len(all[0].total))
	phases := append([]string{"init"}, coldStartPhases...)
	for _, p := range phases {
		fmt.Fprintf(w, " %s |", p)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---:|---:|")
	for range phases {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, c := range all {
		conv := "—"
		if len(c.converged) > 0 {
			conv = ms(percentile(c.converged, 0.5)) + " / " + ms(percentile(c.converged, 0.99))
		}
		fmt.Fprintf(w, "| %s | %s / %s | %s |", c.label, ms(percentile(c.total, 0.5)), ms(percentile(c.total, 0.99)), conv)
		for _, p := range phases {
			if ds := c.phases[p]; len(ds) > 0 {
				fmt.Fprintf(w, " %s / %s |", ms(percentile(ds, 0.5)), ms(percentile(ds, 0.99)))
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		fmt.Fprintln(w)
	}
	if up, hk := all[len(all)-1], all[1]; len(up.total) > 0 {
		fmt.Fprintf(w, "\nentry's p99 is %.3f of upstream's p50 (goal ≤ 0.1)\n", float64(percentile(hk.total, 0.99))/float64(percentile(up.total, 0.5)))
	}
}

// usage is what a process used: CPU seconds (user and system), and RSS now and at its peak.
type usage struct {
	cpu       time.Duration
	rss, peak uint64 // bytes
}

// usageOf reads /proc/<pid>/stat and status.
func usageOf(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(fields) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64)
	stime, _ := strconv.ParseUint(fields[12], 10, 64)
	const ticks = 100 // USER_HZ
	u.cpu = time.Duration(utime+stime) * time.Second / ticks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for line := range strings.Lines(string(status)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.rss = kb << 10
		case "VmHWM":
			u.peak = kb << 10
		}
	}
	return u, nil
}

// idleProc is an always-on process of the idle table.
type idleProc struct {
	label   string
	pid     int
	metrics string // /metrics address, "" for none
}

// printIdle watches the always-on processes for idle with nothing happening.
func (w *restWorld) printIdle(b *testing.B, out io.Writer, up *restProc, idle time.Duration) {
	// The chart runs two bridge replicas; the one not leading waits for the Lease.
	standby := w.startBridge(b, "bridge-standby", "bench-standby")
	defer standby.Stop()
	// Knative mode adds the forwarder of every function, always on (it holds no events here:
	// nothing is pending, and it is stopped before anything happens again).
	forwarder := w.start(b, "forward", filepath.Join(w.e.binDir, "housekeeper"), "forward", "--function", strings.Join(all.Names(), ","),
		"--url", "http://127.0.0.1:1/{function}")
	defer forwarder.Stop()
	procs := []idleProc{
		{"housekeeper bridge, the leader (KEDA and Knative)", w.bridge.Pid(), w.bridge.Addr},
		{"housekeeper bridge, the standby replica", standby.Pid(), standby.Addr},
		{"housekeeper forward, every function's (Knative mode only)", forwarder.Pid(), forwarder.Addr},
		{"nats-server (1 node, R1; a cluster runs 3)", w.nats.Nodes[0].Pid(), ""},
		{"upstream provider-local (BackupBucket and BackupEntry controllers, leader)", up.Pid(), up.Addr},
	}
	if err := w.awaitLease("provider-local-leader-election", time.Minute); err != nil {
		b.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the warm-up's last writes settle
	type sample struct {
		u    usage
		reqs map[string]float64
	}
	take := func() []sample {
		s := make([]sample, len(procs))
		for i, p := range procs {
			u, err := usageOf(p.pid)
			if err != nil {
				b.Fatalf("%s: %v", p.label, err)
			}
			s[i].u = u
			if p.metrics != "" {
				if s[i].reqs, _, err = scrapeRequests(p.metrics); err != nil {
					b.Fatalf("%s: %v", p.label, err)
				}
			}
		}
		return s
	}
	logf("rest: %s at rest", idle)
	before := take()
	for end := time.Now().Add(idle); time.Now().Before(end); {
		time.Sleep(min(30*time.Second, time.Until(end)))
		logf("rest: at rest, %s left", time.Until(end).Round(time.Second))
	}
	after := take()
	fmt.Fprintf(out, "\n| always on, %s at rest | RSS (MiB) | peak RSS (MiB) | CPU (s) | API requests/min (by verb) |\n|---|---:|---:|---:|---|\n", idle)
	for i, p := range procs {
		reqs := "—"
		if p.metrics != "" {
			byVerb := map[string]float64{}
			total := 0.0
			for verb, v := range after[i].reqs {
				if d := v - before[i].reqs[verb]; d > 0 {
					byVerb[verb] = d / idle.Minutes()
					total += d
				}
			}
			reqs = fmt.Sprintf("%.1f", total/idle.Minutes())
			if len(byVerb) > 0 {
				reqs += " (" + describe(byVerb, 1) + ")"
			}
		}
		fmt.Fprintf(out, "| %s | %.1f | %.1f | %.2f | %s |\n", p.label, float64(after[i].u.rss)/(1<<20), float64(after[i].u.peak)/(1<<20),
			(after[i].u.cpu - before[i].u.cpu).Seconds(), reqs)
	}
	fmt.Fprintln(out, "\nThe functions are at zero replicas at rest (KEDA); their processes are not running.")
}

// awaitLease waits until the Lease name in garden has a holder.
func (w *restWorld) awaitLease(name string, timeout time.Duration) error {
	return stack.Poll(timeout, 100*time.Millisecond, "Lease "+name+" held", func() (bool, string, error) {
		l := &coordinationv1.Lease{}
		if err := w.e.driver.Get(context.Background(), client.ObjectKey{Namespace: gardenNamespace, Name: name}, l); err != nil {
			return false, err.Error(), nil
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "", nil
	})
}

// latency is one side's serial create → converged and delete → gone.
type latency struct{ create, delete []time.Duration }

// serial creates n entries one at a time, each once the one before converged, then deletes
// them one at a time, with whatever side is running; the bucket is deployed and deleted
// around it.
func (w *restWorld) serial(b *testing.B, phase string, n int) latency {
	ctx := context.Background()
	p := newPhaseObjects(phase, n)
	w.e.obs.track(p.entries)
	if err := createInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	if err := deployBucket(ctx, w.e.driver, p, 2*time.Minute); err != nil {
		b.Fatal(err)
	}
	logf("rest: %s: %d entries one at a time", phase, n)
	for _, name := range p.entries {
		w.e.obs.setCreated(name, time.Now())
		if err := w.e.driver.Create(ctx, newEntry(name, p.bucket)); err != nil {
			b.Fatal(err)
		}
		if err := w.awaitEntries([]string{name}, time.Minute, "converged", func(o entryObs) bool { return !o.converged.IsZero() }); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range p.entries {
		w.e.obs.setDeleteStart(name, time.Now())
		if err := deleteExtensionObject(ctx, w.e.driver, newEntry(name, p.bucket)); err != nil {
			b.Fatal(err)
		}
		if err := w.awaitEntries([]string{name}, time.Minute, "gone", func(o entryObs) bool { return !o.gone.IsZero() }); err != nil {
			b.Fatal(err)
		}
	}
	var l latency
	for _, o := range w.e.obs.snapshot(p.entries) {
		l.create = append(l.create, o.converged.Sub(o.created))
		l.delete = append(l.delete, o.gone.Sub(o.deleteStart))
	}
	if err := deleteBucket(ctx, w.e.driver, p, 2*time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := deleteInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	return l
}

func printLatency(out io.Writer, n int, hk, up latency) {
	ms := func(ds []time.Duration, p float64) string {
		return fmt.Sprintf("%.1f", float64(percentile(ds, p))/float64(time.Millisecond))
	}
	fmt.Fprintf(out, "\n| latency at rest, one entry at a time (%d), ms | create → Succeeded + etcd-backup p50 | p99 | delete → gone p50 | p99 |\n|---|---:|---:|---:|---:|\n", n)
	fmt.Fprintf(out, "| housekeeper (bridge → NATS → functions, warm) | %s | %s | %s | %s |\n", ms(hk.create, 0.5), ms(hk.create, 0.99), ms(hk.delete, 0.5), ms(hk.delete, 0.99))
	fmt.Fprintf(out, "| upstream provider-local (warm) | %s | %s | %s | %s |\n", ms(up.create, 0.5), ms(up.create, 0.99), ms(up.delete, 0.5), ms(up.delete, 0.99))
	fmt.Fprintf(out, "\nhousekeeper − upstream at p50: create %+.1f ms, delete %+.1f ms (goal ≤ +10); p99 ratio: create %.2f, delete %.2f (goal ≤ 2)\n",
		float64(percentile(hk.create, 0.5)-percentile(up.create, 0.5))/float64(time.Millisecond),
		float64(percentile(hk.delete, 0.5)-percentile(up.delete, 0.5))/float64(time.Millisecond),
		float64(percentile(hk.create, 0.99))/float64(percentile(up.create, 0.99)),
		float64(percentile(hk.delete, 0.99))/float64(percentile(up.delete, 0.99)))
}
