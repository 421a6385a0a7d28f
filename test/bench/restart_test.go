package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// BenchmarkRestart measures what a restart costs each side with restartEntries settled
// BackupEntries and their BackupBucket on the server (converged, nothing outstanding): the API
// requests and the function runs (upstream: reconciles) it causes, and how long until all is
// quiet again. housekeeper runs as at rest (rest_test.go: one nats-server process, the bridge
// leader-elected on its Lease) with the bucket, entry and purge functions running:
//
//   - restart: the bridge stopped with SIGTERM (it gives up the Lease) and started again;
//   - leader change: a second bridge replica stands by; the leader is killed with SIGKILL (the
//     standby leads once the Lease expires) or stopped with SIGTERM;
//   - restart with no announcement of the settled objects in JetStream's duplicate window
//     (events.DuplicateWindow): the first restart after the objects settled, which is what a
//     restart finds once the window has passed since the last one. It runs first, so the others
//     run within the window;
//   - the leading bridge's periodic resync, which lists every object again.
//
// Upstream provider-local's BackupBucket and BackupEntry controllers run as a process
// (test/bench/upstream, leader election on a Lease, as deployed), stopped with SIGTERM and
// started again. Run it alone:
//
//	go test -run '^$' -bench BenchmarkRestart -benchtime 1x -timeout 90m ./test/bench/
//
// HOUSEKEEPER_BENCH_RESTART_ENTRIES scales it down for a trial.
func BenchmarkRestart(b *testing.B) {
	n := testenv.EnvInt(b, "HOUSEKEEPER_BENCH_RESTART_ENTRIES", 5000)
	for b.Loop() {
		w := startRestWorld(b)
		w.populate(b, n, 0)
		w.startFunctions(b, "bucket", "entry", "purge")
		first := w.restartBridge(b, n, "housekeeper: bridge restart after the duplicate window (here the first restart after the objects settled)")
		within := w.restartBridge(b, n, "housekeeper: bridge restart (SIGTERM, started again), within the duplicate window")
		killed := w.leaderChange(b, n, syscall.SIGKILL, "housekeeper: leader change (leader SIGKILLed, the standby takes over), within the window")
		stopped := w.leaderChange(b, n, syscall.SIGTERM, "housekeeper: leader change (leader stopped with SIGTERM, the standby takes over), within the window")
		resync := w.resync(b, n, "housekeeper: periodic resync (--resync-period), every object listed again")
		w.stopFunctions()
		annotated := w.operationAnnotated(b)
		up, upFirst := w.restartUpstream(b, n, "upstream provider-local: restart (SIGTERM, started again)")
		printRestarts(os.Stdout, n, []restart{within, killed, stopped, first, resync, up}, annotated, upFirst)
	}
}

// restartQuiet is how long nothing may happen for a restart to be over.
const restartQuiet = 5 * time.Second

// restart is what one restart caused.
type restart struct {
	label    string
	upstream bool
	resync   bool      // no process replaced: a resync of the leading one
	signal   time.Time // the old process was signalled
	led      time.Time // the new process was first seen leading
	last     time.Time // the last activity seen (at the earliest, the new process started)
	// proc and fns are the requests of the new process and of the functions, by "verb
	// resource", watches included (an informer's initial list is a watch, WatchList), the
	// Lease's left out.
	proc, fns map[string]float64
	// runs are the deliveries the functions handled (upstream: reconciles).
	runs float64
	// published, duplicates and stored: the events the new bridge had acknowledged, those
	// JetStream dropped as duplicates, and the events the stream of record stored.
	published, duplicates, stored float64
}

// quiet is the time from the signal until the new process led and nothing happened any more.
func (r restart) quiet() time.Duration {
	end := r.last
	if r.led.After(end) {
		end = r.led
	}
	return end.Sub(r.signal)
}

// activity is a sample of counters; any change between two samples is activity.
type activity map[string]float64

func (a activity) minus(base activity) activity {
	out := activity{}
	for k, v := range a {
		out[k] = v - base[k]
	}
	return out
}

// part is the keys with prefix, the prefix cut off.
func (a activity) part(prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if rest, ok := strings.CutPrefix(k, prefix); ok && v != 0 {
			out[rest] = v
		}
	}
	return out
}

// addRequests adds the requests the process at addr sent, by "verb resource" under prefix,
// watches included and the Lease's (leader election) left out.
func (a activity) addRequests(prefix, addr string) error {
	reqs, err := scrapeAllRequests(addr)
	if err != nil {
		return err
	}
	for k, v := range reqs {
		if _, resource, _ := strings.Cut(k, " "); resource != "leases" {
			a[prefix+k] += v
		}
	}
	return nil
}

const (
	publishedMetric = "housekeeper_bridge_events_published_total"
	duplicateMetric = "housekeeper_bridge_events_duplicate_total"
	unchangedMetric = "housekeeper_bridge_objects_unchanged_total"
)

// hkActivity samples the functions, the stream of record and, unless nil, the bridge.
func (w *restWorld) hkActivity(bridge *restProc) (activity, error) {
	a := activity{}
	for _, p := range w.running {
		if err := a.addRequests("functions ", p.Addr); err != nil {
			return nil, err
		}
		handled, err := scrapeCounter(p.Addr, "housekeeper_function_handled_total")
		if err != nil {
			return nil, err
		}
		a["runs"] += handled
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := w.js.Stream(ctx, events.RecordStream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	a["stored"] = float64(info.State.LastSeq)
	if bridge != nil {
		if err := a.addRequests("proc ", bridge.Addr); err != nil {
			return nil, err
		}
		for _, m := range []string{publishedMetric, duplicateMetric} {
			if a[m], err = scrapeCounter(bridge.Addr, m); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// restartBridge stops the bridge with SIGTERM, starts it again and measures until all is quiet.
func (w *restWorld) restartBridge(b *testing.B, n int, label string) restart {
	logf("restart: %s", label)
	base, err := w.hkActivity(nil) // the new process's counters start at zero
	if err != nil {
		b.Fatal(err)
	}
	signal := time.Now()
	w.bridge.Stop()
	w.bridge = w.startBridge(b, "bridge", "bench")
	return w.measureBridge(b, n, label, signal, base)
}

// leaderChange starts a second bridge replica, waits until it stands by, ends the leader with
// sig and measures until the standby leads and all is quiet.
func (w *restWorld) leaderChange(b *testing.B, n int, sig syscall.Signal, label string) restart {
	logf("restart: %s", label)
	standby := w.startBridge(b, "bridge-standby", "bench-standby-"+strings.ToLower(strings.TrimPrefix(fmt.Sprint(sig), "SIG")))
	b.Cleanup(standby.Stop)
	if err := standby.AwaitReady(time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := awaitLogLine(standby, "standing by", time.Minute); err != nil {
		b.Fatal(err)
	}
	base, err := w.hkActivity(standby)
	if err != nil {
		b.Fatal(err)
	}
	signal := time.Now()
	if err := w.bridge.Signal(sig); err != nil {
		b.Fatal(err)
	}
	<-w.bridge.Done()
	w.bridge = standby
	return w.measureBridge(b, n, label, signal, base)
}

// measureBridge waits until the bridge leads, has announced everything, the functions'
// consumers are drained and nothing happened for restartQuiet, and says what happened since
// base.
func (w *restWorld) measureBridge(b *testing.B, n int, label string, signal time.Time, base activity) restart {
	bridge := w.bridge
	budget, _ := waitBudget(n)
	leading := func() (bool, error) {
		v, err := scrapeCounter(bridge.Addr, "housekeeper_bridge_leader")
		return v == 1, err
	}
	idle := func() (bool, error) {
		depth, err := scrapeCounter(bridge.Addr, "housekeeper_bridge_queue_depth")
		if err != nil || depth != 0 {
			return false, err
		}
		for fn := range w.running {
			pending, acks, err := w.pending(fn)
			if err != nil || pending != 0 || acks != 0 {
				return false, err
			}
		}
		return true, nil
	}
	led, last, a, err := awaitQuiet(label, bridge, budget, func() (activity, error) { return w.hkActivity(bridge) }, leading, idle)
	if err != nil {
		b.Fatal(err)
	}
	d := a.minus(base)
	return restart{label: label, signal: signal, led: led, last: last, proc: d.part("proc "), fns: d.part("functions "),
		runs: d["runs"], published: d[publishedMetric], duplicates: d[duplicateMetric], stored: d["stored"]}
}

// resync waits for the leading bridge's next periodic resync (benchResyncPeriod), which lists
// every object again, and measures from then until all is quiet.
func (w *restWorld) resync(b *testing.B, n int, label string) restart {
	logf("restart: %s", label)
	base, err := w.hkActivity(w.bridge)
	if err != nil {
		b.Fatal(err)
	}
	before, err := scrapeCounter(w.bridge.Addr, unchangedMetric)
	if err != nil {
		b.Fatal(err)
	}
	for end := time.Now().Add(benchResyncPeriod + time.Minute); ; time.Sleep(250 * time.Millisecond) {
		after, err := scrapeCounter(w.bridge.Addr, unchangedMetric)
		if err != nil {
			b.Fatal(err)
		}
		published, err := scrapeCounter(w.bridge.Addr, publishedMetric)
		if err != nil {
			b.Fatal(err)
		}
		if after > before || published > base[publishedMetric] {
			break // the resync is under way
		}
		if time.Now().After(end) {
			b.Fatalf("%s: no resync within %s", label, benchResyncPeriod+time.Minute)
		}
	}
	r := w.measureBridge(b, n, label, time.Now(), base)
	r.resync = true
	return r
}

// restartUpstream starts upstream's process (leader election on), waits until it leads and is
// quiet, stops it with SIGTERM, starts it again and measures until the new process leads and
// is quiet. It also returns the reconciles of the first start.
func (w *restWorld) restartUpstream(b *testing.B, n int, label string) (restart, float64) {
	logf("restart: %s", label)
	budget, _ := waitBudget(n)
	measure := func(p *restProc) (time.Time, time.Time, activity) {
		sample := func() (activity, error) {
			a := activity{}
			if err := a.addRequests("proc ", p.Addr); err != nil {
				return nil, err
			}
			var err error
			a["runs"], err = scrapeCounter(p.Addr, "controller_runtime_reconcile_total")
			return a, err
		}
		leading := func() (bool, error) {
			v, err := scrapeCounter(p.Addr, "leader_election_master_status")
			return v == 1, err
		}
		led, last, a, err := awaitQuiet(label, p, budget, sample, leading, func() (bool, error) { return true, nil })
		if err != nil {
			b.Fatal(err)
		}
		return led, last, a
	}
	first := w.startUpstreamProc(b, true)
	_, _, a := measure(first)
	signal := time.Now()
	first.Stop()
	again := w.startUpstreamProc(b, true)
	defer again.Stop()
	led, last, d := measure(again)
	return restart{label: label, upstream: true, signal: signal, led: led, last: last, proc: d.part("proc "), runs: d["runs"]}, a["runs"]
}

// awaitQuiet samples every 250 ms until the process p leads, idle holds and the sample has not
// changed for restartQuiet. It returns when it first saw p lead, when the sample last changed
// (at the earliest, its first answer) and the last sample. Until p's /metrics answers, a failed
// sample is p still starting.
func awaitQuiet(what string, p *restProc, timeout time.Duration, sample func() (activity, error), leading, idle func() (bool, error)) (led, last time.Time, a activity, err error) {
	start := time.Now()
	end, nextLog := start.Add(timeout), start.Add(10*time.Second)
	for {
		if p.Exited() {
			return led, last, nil, fmt.Errorf("%s: %s exited: %v (log %s)", what, p.Name, p.State(), p.log)
		}
		s, err := sample()
		now := time.Now()
		switch {
		case err != nil && a != nil:
			return led, last, nil, fmt.Errorf("%s: %w", what, err)
		case err != nil: // not serving /metrics yet
		case a == nil || !maps.Equal(s, a):
			a, last = s, now
		}
		if a != nil && led.IsZero() {
			ok, err := leading()
			if err != nil {
				return led, last, nil, fmt.Errorf("%s: %w", what, err)
			}
			if ok {
				led = now
			}
		}
		if !led.IsZero() && now.Sub(last) >= restartQuiet {
			ok, err := idle()
			if err != nil {
				return led, last, nil, fmt.Errorf("%s: %w", what, err)
			}
			if ok {
				return led, last, a, nil
			}
		}
		if now.After(end) {
			return led, last, nil, fmt.Errorf("%s: not quiet within %s (leading: %t, last activity %s ago)", what, timeout.Round(time.Second), !led.IsZero(), now.Sub(last).Round(time.Second))
		}
		if now.After(nextLog) {
			logf("restart: waiting for quiet, %s (leading: %t, runs %.0f, stored %.0f)", now.Sub(start).Round(time.Second), !led.IsZero(), a["runs"], a["stored"])
			nextLog = now.Add(10 * time.Second)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// awaitLogLine waits until p's log holds text.
func awaitLogLine(p *restProc, text string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		if log, err := os.ReadFile(p.log); err == nil && strings.Contains(string(log), text) {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited: %v (log %s)", p.Name, p.State(), p.log)
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s logged no %q within %s (log %s)", p.Name, text, timeout, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// operationAnnotated counts the BackupEntries and BackupBuckets that carry gardenlet's
// operation annotation: upstream reconciles those at start.
func (w *restWorld) operationAnnotated(b *testing.B) int {
	ctx := context.Background()
	n := 0
	var entries extensionsv1alpha1.BackupEntryList
	if err := w.e.driver.List(ctx, &entries); err != nil {
		b.Fatal(err)
	}
	for _, e := range entries.Items {
		if _, ok := e.Annotations[v1beta1constants.GardenerOperation]; ok {
			n++
		}
	}
	var buckets extensionsv1alpha1.BackupBucketList
	if err := w.e.driver.List(ctx, &buckets); err != nil {
		b.Fatal(err)
	}
	for _, bb := range buckets.Items {
		if _, ok := bb.Annotations[v1beta1constants.GardenerOperation]; ok {
			n++
		}
	}
	return n
}

func printRestarts(w io.Writer, n int, rows []restart, annotated int, upFirst float64) {
	total := func(m map[string]float64) float64 {
		t := 0.0
		for _, v := range m {
			t += v
		}
		return t
	}
	fmt.Fprintf(w, "\n### Restart with %d settled BackupEntries and their BackupBucket, housekeeper and upstream\n\n", n)
	fmt.Fprintln(w, "| what restarts | API requests by the restarted / new process | API requests by the functions | events announced / dropped as duplicates | events that reached functions (function runs; upstream: reconciles) | stop → new process leads (s) | time until quiet (s) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fns, announced := fmt.Sprintf("%.0f", total(r.fns)), fmt.Sprintf("%.0f / %.0f", r.published, r.duplicates)
		if r.upstream {
			fns, announced = "— (in the process)", "—"
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %.0f | %.1f | %.1f |\n", r.label, total(r.proc), fns, announced, r.runs, r.led.Sub(r.signal).Seconds(), r.quiet().Seconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "API requests are counted by each process (kube.Instrument), watches included — an informer's initial list is a watch (WatchList) — and the Lease's renewals left out. Announced: the new bridge's events JetStream acknowledged, and those it dropped as duplicates among them (housekeeper_bridge_events_published_total, _duplicate_total); function runs: the deliveries the functions handled (housekeeper_function_handled_total); upstream's reconciles: controller_runtime_reconcile_total. Quiet: the new process leads and for %s no request, no function run or reconcile, no event stored; housekeeper's also with the bridge's queue empty and the functions' consumers drained. Times from the old process's signal, polled every 250 ms.\n", restartQuiet)
	fmt.Fprintf(w, "\nhousekeeper's bridge reads the last event of every object from the stream of record when it starts leading and announces an object again only if it has work outstanding or its inputs (its desired state, its credentials, its namespace) differ from that event's; the periodic resync compares the same way. So whether a restart falls within JetStream's duplicate window (events.DuplicateWindow, %s) or after it — the first restart after the objects settled, measured here, is one after it for their settled state — no settled object reaches a function. Upstream's controllers reconcile at start only objects with gardenlet's operation annotation, deleting, or whose last operation did not succeed (gardener's extensions/pkg/predicate default predicate; %d of the objects carried the annotation); its first start here ran %.0f reconciles. Its Lease is not given up on SIGTERM, so the new process leads once it expires. The resync row's times run from the first sign of the resync.\n", events.DuplicateWindow, annotated, upFirst)
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "- %s: new process: %s", r.label, describeDetail(r.proc, 1))
		if !r.upstream {
			fmt.Fprintf(w, "; functions: %s; events stored in the stream of record %.0f", describeDetail(r.fns, 1), r.stored)
		}
		fmt.Fprintln(w)
	}
}
