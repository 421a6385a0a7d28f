package bridge

// Benchmarks against the real components, like the tests: a kube-apiserver with etcd and an
// embedded nats-server per benchmark. Each benchmark measures once per call, whatever b.N:
// creating thousands of objects dwarfs the measurement, so under the default -benchtime the
// framework stops at b.N == 1. The built-in ns/op (set-up included) is suppressed; the
// metrics and the tables printed on stdout are the results.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

const (
	// throughputEntries are listed by the bridge and, as many messages, published raw.
	throughputEntries = 5000
	// memoryEntries are cached by the bridge whose heap is measured.
	memoryEntries = 5000
	// unrelatedSecrets are created in namespaces no BackupBucket or BackupEntry references.
	unrelatedSecrets    = 10_000
	unrelatedNamespaces = 100
	// throughputRounds is how often each throughput is measured.
	throughputRounds = 3
	// rawSyncPublishers publish raw messages concurrently, each waiting for its ack.
	rawSyncPublishers = 8
	// createWorkers create the objects concurrently, without client-side rate limit.
	createWorkers = 16
	// benchWait bounds every wait of the benchmarks.
	benchWait = 2 * time.Minute
)

// BenchmarkBridgeThroughput measures events per second from informer to JetStream ack for
// BackupEntries that exist before the bridge starts (the relist after every restart), and raw
// JetStream publish throughput of as many comparable messages on the same nats-server and
// stream: asynchronously with as many acks outstanding as the bridge allows, and synchronously
// with several goroutines. The bridge is compared with the faster of the two. It runs on one
// embedded nats-server (R1) and on a cluster of three nats-server processes (R3).
//
// The bridge's publish throughput is timed from the moment it is synced (it sends nothing
// before every initial list is in) to the last ack. What comes before is printed separately:
// the API server's list up to the first entry the handler sees, and the rest of the initial
// lists while the queue fills. The publish phase includes building and encoding every event,
// which raw publish of pre-encoded messages does not. Each of the three is measured
// throughputRounds times, interleaved, and the median is reported, so that a burst of other
// load on the machine does not decide the ratio; process CPU time per event is printed
// beside, as it depends less on that load.
func BenchmarkBridgeThroughput(b *testing.B) {
	b.Run("R1-embedded", func(b *testing.B) { bridgeThroughput(b, 0) })
	b.Run("R3-cluster", func(b *testing.B) { bridgeThroughput(b, 3) })
}

// bridgeThroughput is BenchmarkBridgeThroughput on natsNodes nats-server processes (a cluster
// of three: the stream R3), or 0: on one embedded nats-server.
func bridgeThroughput(b *testing.B, natsNodes int) {
	quietLibraries()
	h := newHarnessOn(b, natsNodes)
	ctx := context.Background()
	const n = throughputEntries
	window := defaultOptions().MaxInFlight

	createStart := time.Now()
	createEntries(h, n, false)
	created := time.Since(createStart)
	list := listEntries(h, n)
	// Warm the stream up so that no measurement pays for its first writes.
	if _, err := publishAsync(h, encodeEntries(h, list, "bench-warmup"), window); err != nil {
		b.Fatal(err)
	}

	var bridgeRuns []bridgeRun
	var asyncRuns, syncRuns []measured
	retries := 0.0
	for round := range throughputRounds {
		// The same events as the bridge's, with other ids: the source differs.
		msgs := encodeEntries(h, list, fmt.Sprintf("bench-raw-async-%d", round))
		purgeRecordStream(h)
		m, dups, err := measure(func() (int, error) { return publishAsync(h, msgs, window) })
		if err != nil || dups != 0 {
			b.Fatalf("raw async publish: %v, %d duplicates", err, dups)
		}
		asyncRuns = append(asyncRuns, m)

		msgs = encodeEntries(h, list, fmt.Sprintf("bench-raw-sync-%d", round))
		purgeRecordStream(h)
		m, dups, err = measure(func() (int, error) { return publishConcurrently(ctx, h, msgs, rawSyncPublishers) })
		if err != nil || dups != 0 {
			b.Fatalf("raw sync publish: %v, %d duplicates", err, dups)
		}
		syncRuns = append(syncRuns, m)
		msgs = nil

		purgeRecordStream(h)
		run, r := measureBridgePublish(h, fmt.Sprintf("%s-%d", cluster, round), n)
		bridgeRuns, retries = append(bridgeRuns, run), retries+r
	}

	phase := func(of func(bridgeRun) measured) measured {
		ms := make([]measured, len(bridgeRuns))
		for i, r := range bridgeRuns {
			ms[i] = of(r)
		}
		return median(ms)
	}
	bridge := phase(func(r bridgeRun) measured { return r.publish })
	listed := phase(func(r bridgeRun) measured { return r.list })
	gated := phase(func(r bridgeRun) measured { return r.gate })
	raw := median(asyncRuns)
	if m := median(syncRuns); m.wall < raw.wall {
		raw = m
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate(bridge.wall), "bridge-events/s")
	b.ReportMetric(rate(raw.wall), "raw-publish/s")
	b.ReportMetric(rate(bridge.wall)/rate(raw.wall), "bridge/raw")
	b.ReportMetric(listed.wall.Seconds(), "list-s")

	where, cpu := "one embedded nats-server, stream R1", "nats-server included"
	if natsNodes > 0 {
		where, cpu = fmt.Sprintf("%d nats-server processes, stream R%d", natsNodes, natsNodes), "nats-servers not included"
	}
	fmt.Printf("\nBridge throughput on %s: %d BackupEntries existing at start (created in %.1fs), bridge with %d acks outstanding;\n"+
		"raw: the same events pre-encoded, with other ids. Same nats-server and stream. Median of %d rounds;\n"+
		"bridge/raw against the faster raw; CPU is the whole test process's (%s) per event.\n",
		where, n, created.Seconds(), window, throughputRounds, cpu)
	fmt.Printf("  %-44s %6s %9s %11s %10s %8s\n", "what", "N", "seconds", "per second", "bridge/raw", "CPU µs")
	row := func(what string, m measured, ratio string) {
		fmt.Printf("  %-44s %6d %9.3f %11.0f %10s %8.1f\n", what, n, m.wall.Seconds(), rate(m.wall), ratio,
			float64(m.cpu.Microseconds())/n)
	}
	row("bridge: synced to last ack (publish)", bridge, fmt.Sprintf("%.2f", rate(bridge.wall)/rate(raw.wall)))
	row("  before it: Run to first event (list)", listed, "-")
	row("  then: first event to synced (nothing sent)", gated, "-")
	row(fmt.Sprintf("raw: async, %d acks outstanding", window), median(asyncRuns), "-")
	row(fmt.Sprintf("raw: sync, %d goroutines", rawSyncPublishers), median(syncRuns), "-")
	ratios := make([]string, len(bridgeRuns))
	for i := range bridgeRuns {
		ratios[i] = fmt.Sprintf("%.2f", min(asyncRuns[i].wall, syncRuns[i].wall).Seconds()/bridgeRuns[i].publish.wall.Seconds())
	}
	fmt.Printf("  bridge/raw by round: %s\n", strings.Join(ratios, " "))
	if retries > 0 {
		fmt.Printf("  (the bridge retried %v publishes)\n", retries)
	}
}

// measured is the wall and process CPU time of one measurement.
type measured struct{ wall, cpu time.Duration }

// measure times publish, which returns how many acks reported duplicates.
func measure(publish func() (int, error)) (measured, int, error) {
	runtime.GC() // not during the measurement: the garbage of the set-up
	wall, cpu := time.Now(), processCPU()
	dups, err := publish()
	return measured{wall: time.Since(wall), cpu: processCPU() - cpu}, dups, err
}

// bridgeRun is one bridge start timed in its three phases: Run to the entries' handler seeing
// the first listed entry (the API server's list), from there to the bridge synced (the rest of
// the initial lists, while nothing may be published), and from there to the last ack.
type bridgeRun struct{ list, gate, publish measured }

// measureBridgePublish runs a bridge for cluster until every one of the n entries' synced
// events is acknowledged.
func measureBridgePublish(h *harness, cluster string, n int) (run bridgeRun, retries float64) {
	h.t.Helper()
	// The bridge logs "informers synced" when the gate opens, just before its dispatchers start.
	var synced atomic.Pointer[measured]
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "informers synced" {
			synced.Store(&measured{wall: time.Duration(time.Now().UnixNano()), cpu: processCPU()})
		}
		return nil
	}))
	br, err := New(h.env.Kube.Config, h.js, nil, Options{Cluster: cluster, Scope: testScope, Logger: log})
	if err != nil {
		h.t.Fatal(err)
	}
	var first measured
	var seen atomic.Bool
	if _, err := br.informerOf(events.KindBackupEntry).AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		if !seen.Swap(true) {
			first = measured{wall: time.Duration(time.Now().UnixNano()), cpu: processCPU()}
		}
	}}); err != nil {
		h.t.Fatal(err)
	}
	runtime.GC()
	start := measured{wall: time.Duration(time.Now().UnixNano()), cpu: processCPU()}
	stop := runBridge(h.t, br)
	poll(h.t, "every synced event acknowledged", func() bool { return publishedSynced(br) >= float64(n) })
	end := measured{wall: time.Duration(time.Now().UnixNano()), cpu: processCPU()}
	stop()
	if d := testutil.ToFloat64(br.metrics.duplicates); d != 0 {
		h.t.Fatalf("JetStream reported %v of the bridge's events as duplicates; the stream was not fresh", d)
	}
	opened := synced.Load()
	if opened == nil {
		h.t.Fatal("the bridge published without logging \"informers synced\"")
	}
	between := func(a, b measured) measured { return measured{wall: b.wall - a.wall, cpu: b.cpu - a.cpu} }
	return bridgeRun{list: between(start, first), gate: between(first, *opened), publish: between(*opened, end)},
		testutil.ToFloat64(br.metrics.publishErrors)
}

func median(ms []measured) measured {
	sorted := slices.SortedFunc(slices.Values(ms), func(a, b measured) int { return cmp.Compare(a.wall, b.wall) })
	return sorted[len(sorted)/2]
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBridgeMemory measures the heap and the API requests of a bridge that cached and
// published 5,000 realistic BackupEntries, first alone, then with 10,000 secrets in 100
// namespaces that no BackupBucket or BackupEntry references, which must cost it nothing.
//
// nats-server runs in this process too and keeps state for the messages just stored (mostly
// its cache of the blocks just written, dropped some seconds later), so the bridge's share is
// what stopping it frees: heap with the synced bridge running minus heap right after it
// stopped, both after runtime.GC. The growth from before the bridge started, nats-server's
// included, is printed beside it.
func BenchmarkBridgeMemory(b *testing.B) {
	quietLibraries()
	h := newHarness(b)
	const n = memoryEntries

	createStart := time.Now()
	createEntries(h, n, true)
	created := time.Since(createStart)
	// The entries' credentials: the secret every benchEntry references, in garden.
	createSecrets(h, []string{"garden"}, 1, "backup-seed-bucket")

	alone := measureBridge(h, n)
	createStart = time.Now()
	namespaces := make([]string, unrelatedNamespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("shoot--proj%02d--shoot%04d", i%40, i)
	}
	createSecrets(h, namespaces, unrelatedSecrets/unrelatedNamespaces, "")
	secretsCreated := time.Since(createStart)
	crowded := measureBridge(h, n)

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(alone.retained/n, "heap-bytes/entry")
	b.ReportMetric(crowded.retained-alone.retained, "heap-bytes-unrelated-secrets")
	b.ReportMetric(crowded.requests-alone.requests, "requests-unrelated-secrets")

	const mib = 1 << 20
	fmt.Printf("\nBridge memory: %d BackupEntries cached and published (created with status in %.1fs), their secret\n"+
		"in garden; then %d secrets in %d other namespaces (created in %.1fs). Heap after runtime.GC,\n"+
		"nats-server in the same process; requests are the bridge's to the API server until it synced.\n",
		n, created.Seconds(), unrelatedSecrets, unrelatedNamespaces, secretsCreated.Seconds())
	fmt.Printf("  %-50s %14s %16s %10s\n", "what", "entries alone", "+10k unrelated", "difference")
	row := func(what string, format string, scale float64, get func(bridgeCost) float64) {
		a, c := get(alone)/scale, get(crowded)/scale
		fmt.Printf("  %-50s %14s %16s %10s\n", what, fmt.Sprintf(format, a), fmt.Sprintf(format, c), fmt.Sprintf(format, c-a))
	}
	row("held by the bridge, MiB (running minus stopped)", "%.2f", mib, func(c bridgeCost) float64 { return c.retained })
	row("  per entry, bytes", "%.0f", n, func(c bridgeCost) float64 { return c.retained })
	row("growth from start to all published, MiB (+nats)", "%.2f", mib, func(c bridgeCost) float64 { return c.growth })
	row("API requests (list and watch)", "%.0f", 1, func(c bridgeCost) float64 { return c.requests })
	row("secrets cached by the bridge", "%.0f", 1, func(c bridgeCost) float64 { return float64(c.secrets) })
}

// bridgeCost is what one bridge run cost.
type bridgeCost struct {
	retained, growth float64 // heap bytes: freed by stopping the bridge; grown since before it started
	requests         float64 // requests to the API server until every entry was published
	secrets          int     // secrets in the bridge's caches
}

// measureBridge runs a bridge until it acknowledged a synced event for each of the n entries
// and its queue is empty, and measures the heap before, then and after it stopped.
func measureBridge(h *harness, n int) bridgeCost {
	h.t.Helper()
	var c bridgeCost
	before := heapAlloc()
	var running uint64
	func() {
		reg := prometheus.NewRegistry()
		cfg := kube.Instrument(rest.CopyConfig(h.env.Kube.Config), reg)
		br, err := New(cfg, h.js, nil, Options{Cluster: cluster, Scope: testScope, Logger: zap.NewNop()})
		if err != nil {
			h.t.Fatal(err)
		}
		stop := runBridge(h.t, br)
		defer stop()
		poll(h.t, "every entry published", func() bool {
			return br.Synced() && publishedSynced(br) >= float64(n) && br.Pending() == 0
		})
		running = heapAlloc()
		if got := len(br.informerOf(events.KindBackupEntry).GetStore().ListKeys()); got != n {
			h.t.Fatalf("bridge caches %d entries, want %d", got, n)
		}
		c.requests = requestsSent(h.t, reg)
		c.secrets = len(cachedSecrets(br))
	}()
	after := heapAlloc()
	c.retained, c.growth = float64(running)-float64(after), float64(running)-float64(before)
	return c
}

// requestsSent sums kube.RequestsMetric over verbs.
func requestsSent(tb testing.TB, g prometheus.Gatherer) float64 {
	families, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == kube.RequestsMetric {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// quietLibraries discards klog's and controller-runtime's logs, so that stdout holds the
// tables; a failing benchmark says why itself.
func quietLibraries() { logging.RouteLibraries(zap.NewNop()) }

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func defaultOptions() Options {
	var o Options
	o.defaults()
	return o
}

// runBridge runs br; the returned function stops it and waits until Run returned.
func runBridge(tb testing.TB, br *Bridge) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = br.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	tb.Cleanup(stop)
	return stop
}

func publishedSynced(br *Bridge) float64 {
	return testutil.ToFloat64(br.metrics.published.WithLabelValues(events.TypeEntrySynced))
}

// poll waits up to benchWait for cond, checking every millisecond (what is measured ends
// when cond holds).
func poll(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if err := stack.Poll(benchWait, time.Millisecond, what, func() (bool, string, error) { return cond(), "", nil }); err != nil {
		tb.Fatal(err)
	}
}

// benchEntry is BackupEntry i as gardenlet names it (the shoot's technical id and uid), with a
// few labels and annotations and a finalizer; like every entry of a bucket, its secretRef is
// the bucket's secret in garden.
func benchEntry(i int) *extensionsv1alpha1.BackupEntry {
	sum := sha256.Sum256(fmt.Appendf(nil, "shoot-%d", i))
	h := hex.EncodeToString(sum[:16])
	uid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	project, shoot := fmt.Sprintf("proj%02d", i%40), fmt.Sprintf("shoot%04d", i)
	e := entry(fmt.Sprintf("shoot--%s--%s--%s", project, shoot, uid), "azure")
	e.Labels = map[string]string{
		"project.gardener.cloud/name": project,
		"shoot.gardener.cloud/name":   shoot,
	}
	e.Annotations = map[string]string{
		"gardener.cloud/timestamp": time.Date(2025, 6, 1, 12, 0, i%60, i*1000, time.UTC).Format(time.RFC3339Nano),
		"shoot.gardener.cloud/uid": uid,
	}
	e.Finalizers = []string{"extensions.gardener.cloud/backupentry"}
	e.Spec.BucketName = "3d9c1a7e-5b2f-4c8d-9e6a-0f1b2c3d4e5f"
	return e
}

// createEntries creates benchEntry(0..n-1) with createWorkers goroutines; withStatus also
// records a succeeded last operation on each, as the entry's controller would.
func createEntries(h *harness, n int, withStatus bool) {
	h.t.Helper()
	cfg := rest.CopyConfig(h.env.Kube.Config)
	cfg.QPS = -1 // no client-side rate limit: the API server is what these writes measure against
	c, err := kube.NewClient(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	for i := range n {
		g.Go(func() error {
			e := benchEntry(i)
			if err := c.Create(ctx, e); err != nil {
				return fmt.Errorf("creating %s: %w", e.Name, err)
			}
			if !withStatus {
				return nil
			}
			e.Status.ObservedGeneration = e.Generation
			e.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeCreate,
				State: gardencorev1beta1.LastOperationStateSucceeded, Progress: 100,
				Description: "Backup entry reconciled.", LastUpdateTime: metav1.Now()}
			if err := c.Status().Update(ctx, e); err != nil {
				return fmt.Errorf("updating the status of %s: %w", e.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		h.t.Fatal(err)
	}
}

// createSecrets creates perNamespace secrets of about 1 KiB in each namespace (and the
// namespace), named name if given, else secret-<i>.
func createSecrets(h *harness, namespaces []string, perNamespace int, name string) {
	h.t.Helper()
	cfg := rest.CopyConfig(h.env.Kube.Config)
	cfg.QPS = -1
	c, err := kube.NewClient(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			h.t.Fatal(err)
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	for _, ns := range namespaces {
		for i := range perNamespace {
			g.Go(func() error {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Data: map[string][]byte{"key": bytes.Repeat([]byte{byte('a' + i%26)}, 1000)}}
				if name == "" {
					s.Name = fmt.Sprintf("secret-%d", i)
				}
				return c.Create(ctx, s)
			})
		}
	}
	if err := g.Wait(); err != nil {
		h.t.Fatal(err)
	}
}

// listEntries lists the first n entries in the API server, without managedFields as the
// bridge caches them.
func listEntries(h *harness, n int) []extensionsv1alpha1.BackupEntry {
	h.t.Helper()
	var list extensionsv1alpha1.BackupEntryList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	if len(list.Items) < n {
		h.t.Fatalf("%d entries in the API server, want at least %d", len(list.Items), n)
	}
	for i := range list.Items {
		list.Items[i].SetManagedFields(nil)
	}
	return list.Items[:n]
}

// encodeEntries encodes a synced event for each entry as the bridge would, but with the
// source cluster src, so their ids differ from the bridge's.
func encodeEntries(h *harness, entries []extensionsv1alpha1.BackupEntry, src string) []*nats.Msg {
	h.t.Helper()
	msgs := make([]*nats.Msg, len(entries))
	for i := range entries {
		e, err := objectEvent(src, events.KindBackupEntry, events.OpSynced, &entries[i])
		if err != nil {
			h.t.Fatal(err)
		}
		if msgs[i], err = events.Encode(e); err != nil {
			h.t.Fatal(err)
		}
	}
	return msgs
}

// publishConcurrently publishes msgs with the given number of goroutines, each waiting for
// its ack, and returns how many acks reported duplicates.
func publishConcurrently(ctx context.Context, h *harness, msgs []*nats.Msg, publishers int) (int, error) {
	var next, dups atomic.Int64
	errs := make([]error, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(msgs)); i = next.Add(1) - 1 {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				ack, err := h.js.PublishMsg(pctx, msgs[i])
				cancel()
				if err != nil {
					errs[p] = fmt.Errorf("publishing %s: %w", msgs[i].Subject, err)
					return
				}
				if ack.Duplicate {
					dups.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(dups.Load()), errors.Join(errs...)
}

// publishAsync publishes msgs without waiting for each ack, with at most window acks
// outstanding (nats.go's own bound), waits for every ack and returns how many acks reported
// duplicates.
func publishAsync(h *harness, msgs []*nats.Msg, window int) (int, error) {
	js, err := jetstream.New(h.nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return 0, err
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		if futures[i], err = js.PublishMsgAsync(m); err != nil {
			return 0, fmt.Errorf("publishing %s: %w", m.Subject, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(benchWait):
		return 0, fmt.Errorf("acks outstanding after %s", benchWait)
	}
	dups := 0
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				dups++
			}
		case err := <-f.Err():
			return 0, fmt.Errorf("publishing %s: %w", msgs[i].Subject, err)
		}
	}
	return dups, nil
}

func purgeRecordStream(h *harness) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, events.RecordStream)
	if err == nil {
		err = s.Purge(ctx)
	}
	if err != nil {
		h.t.Fatalf("purging %s: %v", events.RecordStream, err)
	}
}
