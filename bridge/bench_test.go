package bridge

// Benchmarks against the real components, like the tests: a kube-apiserver with etcd and an
// embedded nats-server per benchmark. Each benchmark measures once per call, whatever b.N:
// creating thousands of objects dwarfs the measurement, so under the default -benchtime the
// framework stops at b.N == 1. The built-in ns/op (set-up included) is suppressed; the
// metrics and the tables printed on stdout are the results.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
)

const (
	// throughputEntries are listed by the bridge and, as many messages, published raw.
	throughputEntries = 5000
	// memoryEntries are cached by the bridge whose heap is measured.
	memoryEntries = 10_000
	// createWorkers create the objects concurrently, without client-side rate limit.
	createWorkers = 16
	// benchWait bounds every wait of the benchmarks.
	benchWait = 2 * time.Minute
)

// BenchmarkBridgeThroughput measures events per second from informer to JetStream ack for
// BackupEntries that exist before the bridge starts (the relist after every restart), and raw
// JetStream publish throughput of as many comparable messages, with as many concurrent
// publishers, on the same nats-server and stream.
func BenchmarkBridgeThroughput(b *testing.B) {
	quietLibraries()
	h := newHarness(b)
	ctx := context.Background()
	const n = throughputEntries
	workers := defaultWorkers()

	createStart := time.Now()
	createEntries(h, n, false)
	created := time.Since(createStart)

	// As many events about the same entries as the bridge publishes, with other ids.
	raw := encodedEntries(h, "bench-raw", n)
	// Warm the stream up so that neither measurement pays for its first writes, then empty it.
	warmUp := encodedEntries(h, "bench-warmup", 200)
	if _, _, err := publishConcurrently(ctx, h, warmUp, workers); err != nil {
		b.Fatal(err)
	}
	purgeRecordStream(h)
	runtime.GC() // not during the measurement: the garbage of the set-up

	// The bridge: from Run until every entry's synced event is acknowledged.
	br, err := New(h.env.Kube.Config, h.js, nil, Options{Cluster: cluster, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	stop := runBridge(b, br)
	var listed time.Duration
	deadline := start.Add(benchWait)
	for publishedSynced(br) < n {
		if listed == 0 && br.entries.HasSynced() {
			listed = time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %s only %v of %d synced events acknowledged", benchWait, publishedSynced(br), n)
		}
		time.Sleep(time.Millisecond)
	}
	bridgeTime := time.Since(start)
	if listed == 0 {
		listed = bridgeTime
	}
	stop()
	if d := testutil.ToFloat64(br.metrics.duplicates); d != 0 {
		b.Fatalf("JetStream reported %v of the bridge's events as duplicates; the stream was not fresh", d)
	}
	retries := testutil.ToFloat64(br.metrics.publishErrors)

	// Raw publish of the pre-encoded events, into the emptied stream.
	purgeRecordStream(h)
	rawTime, dups, err := publishConcurrently(ctx, h, raw, workers)
	if err != nil {
		b.Fatal(err)
	}
	if dups != 0 {
		b.Fatalf("JetStream reported %d raw messages as duplicates", dups)
	}

	bridgeRate := float64(n) / bridgeTime.Seconds()
	rawRate := float64(n) / rawTime.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(bridgeRate, "bridge-events/s")
	b.ReportMetric(rawRate, "raw-publish/s")
	b.ReportMetric(bridgeRate/rawRate, "bridge/raw")
	b.ReportMetric(listed.Seconds(), "list-s")

	fmt.Printf("\nBridge throughput: %d BackupEntries existing at start (created in %.1fs), %d bridge workers;\n"+
		"raw: %d goroutines publishing pre-encoded events and waiting for acks. Same nats-server and stream.\n",
		n, created.Seconds(), workers, workers)
	fmt.Printf("  %-42s %6s %9s %11s %11s\n", "what", "N", "seconds", "per second", "bridge/raw")
	fmt.Printf("  %-42s %6d %9.3f %11.0f %11.2f\n", "bridge: informer list to last ack", n, bridgeTime.Seconds(), bridgeRate, bridgeRate/rawRate)
	fmt.Printf("  %-42s %6d %9.3f %11.0f %11s\n", "  of which entries listed (informer sync)", n, listed.Seconds(), float64(n)/listed.Seconds(), "-")
	fmt.Printf("  %-42s %6d %9.3f %11.0f %11.2f\n", "raw JetStream publish to ack", n, rawTime.Seconds(), rawRate, 1.0)
	if retries > 0 {
		fmt.Printf("  (the bridge retried %v publishes)\n", retries)
	}
}

// BenchmarkBridgeMemoryPer10kEntries measures the heap a bridge holds once it cached and
// published 10,000 realistic BackupEntries.
//
// nats-server runs in this process too and keeps state for the messages just stored (mostly
// its cache of the blocks just written, dropped some seconds later), so the bridge's share is
// what stopping it frees: heap with the synced bridge running minus heap right after it
// stopped. The growth from before the bridge started, nats-server's included, is printed
// beside it.
func BenchmarkBridgeMemoryPer10kEntries(b *testing.B) {
	quietLibraries()
	h := newHarness(b)
	const n = memoryEntries

	createStart := time.Now()
	createEntries(h, n, true)
	created := time.Since(createStart)

	before, running, after := measureBridgeHeap(h, n)
	retained := float64(running) - float64(after)
	growth := float64(running) - float64(before)
	per10k := 10_000 / float64(n)

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(retained*per10k, "heap-bytes/10k-entries")
	b.ReportMetric(growth*per10k, "heap-growth-bytes/10k-entries")

	const mib = 1 << 20
	fmt.Printf("\nBridge memory: %d BackupEntries cached and published (created with status in %.1fs),\n"+
		"heap allocated after runtime.GC, nats-server in the same process.\n", n, created.Seconds())
	fmt.Printf("  %-50s %7s %9s %11s\n", "what", "entries", "MiB", "bytes/entry")
	fmt.Printf("  %-50s %7d %9.1f %11.0f\n", "held by the bridge (running minus stopped)", n, retained/mib, retained/n)
	fmt.Printf("  %-50s %7d %9.1f %11.0f\n", "growth from start to all published (+nats-server)", n, growth/mib, growth/n)
	fmt.Printf("  %-50s %7d %9.1f %11s\n", "  heap before the bridge started", n, float64(before)/mib, "-")
}

// measureBridgeHeap returns the heap allocated before a bridge starts, once it acknowledged a
// synced event for each of the n entries and its queue is empty, and after it stopped.
func measureBridgeHeap(h *harness, n int) (before, running, after uint64) {
	h.t.Helper()
	before = heapAlloc()
	func() {
		br, err := New(h.env.Kube.Config, h.js, nil, Options{Cluster: cluster, Logger: zap.NewNop()})
		if err != nil {
			h.t.Fatal(err)
		}
		stop := runBridge(h.t, br)
		defer stop()
		poll(h.t, "every entry published", func() bool {
			return br.Synced() && publishedSynced(br) >= float64(n) && br.Pending() == 0
		})
		running = heapAlloc()
		if got := len(br.entries.GetStore().ListKeys()); got != n {
			h.t.Fatalf("bridge caches %d entries, want %d", got, n)
		}
	}()
	after = heapAlloc()
	return before, running, after
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

func defaultWorkers() int {
	var o Options
	o.defaults()
	return o.Workers
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

// poll waits up to benchWait for cond, checking every millisecond.
func poll(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(benchWait)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", benchWait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// benchEntry is BackupEntry i as gardenlet names it (the shoot's technical id and uid), with a
// few labels and annotations and a finalizer.
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
	e.Spec.SecretRef = corev1.SecretReference{Name: "entry-" + e.Name, Namespace: "garden"}
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

// encodedEntries encodes a synced event for each of the first n entries in the API server as
// the bridge would, but with the source cluster src, so their ids differ from the bridge's.
func encodedEntries(h *harness, src string, n int) []*nats.Msg {
	h.t.Helper()
	var list extensionsv1alpha1.BackupEntryList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	if len(list.Items) < n {
		h.t.Fatalf("%d entries in the API server, want at least %d", len(list.Items), n)
	}
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		obj := &list.Items[i]
		obj.SetManagedFields(nil)
		e, err := events.NewObjectEvent(src, events.KindBackupEntry, events.OpSynced, obj)
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
// its ack, and returns the wall time and how many acks reported duplicates.
func publishConcurrently(ctx context.Context, h *harness, msgs []*nats.Msg, publishers int) (time.Duration, int, error) {
	var next, dups atomic.Int64
	errs := make([]error, publishers)
	var wg sync.WaitGroup
	start := time.Now()
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
	return time.Since(start), int(dups.Load()), errors.Join(errs...)
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
