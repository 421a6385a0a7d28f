package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// row is one line of the table: an implementation with its settings.
type row struct {
	id    string // short, for object names and logs: r1, r2, ...
	label string // implementation / setting
	start func(b *testing.B, e *env, phase string) (side, error)
	// housekeeper marks housekeeper's rows (for the ratios).
	housekeeper bool
}

// result is what a phase measured.
type result struct {
	row row
	n   int

	entriesPerSec float64
	p50, p99      time.Duration
	deleteAll     time.Duration // first deletion call → last entry gone
	delP50        time.Duration // per entry: its deletion call → gone
	delP99        time.Duration

	create, delete             counts // requests per phase, by process and verb
	createDetail, deleteDetail counts // finer breakdown where the side offers one

	secretWritesMean float64 // versions of etcd-backup per entry in the create phase
	secretWritesMax  int

	// createTail and deleteTail are how long the side kept sending requests after the last
	// entry converged, and after the last entry was gone.
	createTail, deleteTail time.Duration

	notes []string

	// costs are the side's processes' CPU and memory per burst; nil for a side in this process.
	costs *costs

	failure string // why the phase failed; empty if it did not
	cleaned bool   // after a failure: the phase's objects are gone
}

// settleQuiet is how long a side must send no request for its phase to count as over.
const (
	settleQuiet = 2 * time.Second
	settleMax   = 3 * time.Minute
)

// runPhase runs one row into res: inputs, the side, its bucket, then the timed create burst
// and the timed delete burst, then the teardown. It fails b when something does not
// converge, with res.failure saying what; res.cleaned then says whether the phase's objects
// were removed (finalizers dropped), so that the next phase can still run.
func runPhase(b *testing.B, e *env, res *result) {
	ctx := context.Background()
	r, n := res.row, res.n
	defer func() {
		if b.Failed() && res.failure == "" {
			res.failure = "failed before the measurement (see the benchmark's log)"
		}
	}()
	p := newPhaseObjects(r.id, n)
	e.obs.track(p.entries)
	if err := ensureGardenNamespace(ctx, e.driver); err != nil {
		b.Fatal(err)
	}
	logf("%s %s: creating the inputs of %d entries (namespaces, credentials)", r.id, r.label, n)
	if err := createInputs(ctx, e.driver, p); err != nil {
		b.Fatal(err)
	}
	s, err := r.start(b, e, r.id)
	if err != nil {
		b.Fatalf("%s: starting: %v", r.label, err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := s.stop(); err != nil {
			b.Errorf("%s: stopping: %v", r.label, err)
		}
	}
	defer stop()
	// fail records why the phase failed, removes its objects and fails b.
	fail := func(format string, args ...any) {
		res.failure = fmt.Sprintf(format, args...)
		stop()
		if err := forceCleanup(ctx, e, p); err != nil {
			b.Errorf("%s: removing the phase's objects: %v", r.label, err)
		} else {
			res.cleaned = true
		}
		b.Fatalf("%s: %s", r.label, res.failure)
	}
	if err := deployBucket(ctx, e.driver, p, 2*time.Minute); err != nil {
		fail("BackupBucket %s did not succeed: %v", p.bucket, err)
	}
	c0, d0, _, err := settle(s, res, "before the create burst")
	if err != nil {
		fail("%v", err)
	}
	meter := newUsageMeter(s, e.logDir, r.id)
	if err := meter.begin("create"); err != nil {
		fail("measuring the side's processes: %v", err)
	}

	// The create burst: every entry as fast as the driver can, the clock of each entry
	// starting at its create call.
	budget, short := waitBudget(n)
	logf("%s %s: creating %d BackupEntries", r.id, r.label, n)
	if err := parallel(n, driverWorkers, func(i int) error {
		name := p.entries[i]
		e.obs.setCreated(name, time.Now())
		return e.driver.Create(ctx, newEntry(name, p.bucket))
	}); err != nil {
		fail("creating BackupEntries: %v", err)
	}
	if !waitFor(e, r, p.entries, budget, "converged", func(o entryObs) bool { return !o.converged.IsZero() }) {
		fail("%s", notConverged(e, p.entries, budget, short, "Succeeded with observedGeneration == generation and etcd-backup present",
			func(o entryObs) bool { return !o.converged.IsZero() }))
	}
	c1, d1, createQuiet, err := settle(s, res, "after the create burst")
	if err != nil {
		fail("%v", err)
	}
	createCost, err := meter.end()
	if err == nil {
		err = meter.begin("delete")
	}
	if err != nil {
		fail("measuring the side's processes: %v", err)
	}
	created := e.obs.snapshot(p.entries)

	// The delete burst, as gardenlet deletes extension objects.
	logf("%s %s: deleting %d BackupEntries", r.id, r.label, n)
	if err := parallel(n, driverWorkers, func(i int) error {
		name := p.entries[i]
		e.obs.setDeleteStart(name, time.Now())
		return deleteExtensionObject(ctx, e.driver, newEntry(name, p.bucket))
	}); err != nil {
		fail("deleting BackupEntries: %v", err)
	}
	if !waitFor(e, r, p.entries, budget, "gone", func(o entryObs) bool { return !o.gone.IsZero() }) {
		fail("%s", notConverged(e, p.entries, budget, short, "gone", func(o entryObs) bool { return !o.gone.IsZero() }))
	}
	c2, d2, deleteQuiet, err := settle(s, res, "after the delete burst")
	if err != nil {
		fail("%v", err)
	}
	deleteCost, err := meter.end()
	if err != nil {
		fail("measuring the side's processes: %v", err)
	}
	if len(meter.procs) > 0 {
		res.costs = &costs{names: meter.names(), create: createCost, delete: deleteCost}
	}
	deleted := e.obs.snapshot(p.entries)
	if left := e.obs.secretsLeft(p.entries); len(left) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d etcd-backup secrets left after deletion, e.g. in %s", len(left), left[0]))
	}

	// Teardown, not measured: the side deletes its bucket, then stops.
	if err := deleteBucket(ctx, e.driver, p, 2*time.Minute); err != nil {
		fail("BackupBucket %s was not deleted: %v", p.bucket, err)
	}
	stop()
	if err := deleteInputs(ctx, e.driver, p); err != nil {
		b.Fatalf("%s: removing the inputs: %v", r.label, err)
	}

	res.create, res.delete = c1.minus(c0), c2.minus(c1)
	if d0 != nil {
		res.createDetail, res.deleteDetail = d1.minus(d0), d2.minus(d1)
	}
	lastConverged, lastGone := res.measure(created, deleted)
	res.createTail, res.deleteTail = max(createQuiet.Sub(lastConverged), 0), max(deleteQuiet.Sub(lastGone), 0)
	res.report(b)
}

// measure computes throughput and latencies from the observations and returns when the last
// entry converged and when the last was gone.
func (res *result) measure(created, deleted []entryObs) (time.Time, time.Time) {
	var (
		first, last time.Time
		lat         []time.Duration
		writes      int
	)
	for _, o := range created {
		if first.IsZero() || o.created.Before(first) {
			first = o.created
		}
		if o.converged.After(last) {
			last = o.converged
		}
		lat = append(lat, o.converged.Sub(o.created))
		writes += o.secretWrites
		res.secretWritesMax = max(res.secretWritesMax, o.secretWrites)
	}
	res.entriesPerSec = float64(len(created)) / last.Sub(first).Seconds()
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	res.secretWritesMean = float64(writes) / float64(len(created))

	var delFirst, delLast time.Time
	var delLat []time.Duration
	for _, o := range deleted {
		if delFirst.IsZero() || o.deleteStart.Before(delFirst) {
			delFirst = o.deleteStart
		}
		if o.gone.After(delLast) {
			delLast = o.gone
		}
		delLat = append(delLat, o.gone.Sub(o.deleteStart))
	}
	res.deleteAll = delLast.Sub(delFirst)
	res.delP50, res.delP99 = percentile(delLat, 0.50), percentile(delLat, 0.99)
	return last, delLast
}

// percentile is the nearest-rank percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// report attaches the row's numbers to the benchmark's output.
func (res *result) report(b *testing.B) {
	n := float64(res.n)
	b.ReportMetric(res.entriesPerSec, "entries/s")
	b.ReportMetric(res.p50.Seconds(), "p50-s")
	b.ReportMetric(res.p99.Seconds(), "p99-s")
	b.ReportMetric(res.deleteAll.Seconds(), "delete-all-s")
	b.ReportMetric(res.create.total(verbs...)/n, "req/entry-create")
	b.ReportMetric(res.delete.total(verbs...)/n, "req/entry-delete")
}

// settle waits until the side has sent no request for settleQuiet and returns its counters
// then, and when they last changed (at the earliest, when settle began); a side that keeps
// sending requests for settleMax is noted, not failed.
func settle(s side, res *result, when string) (counts, counts, time.Time, error) {
	var (
		last      counts
		lastDet   counts
		quietFrom time.Time
		end       = time.Now().Add(settleMax)
	)
	for {
		c, err := s.requests()
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("reading request counters %s: %w", when, err)
		}
		d := s.detail()
		now := time.Now()
		if last == nil || !reflect.DeepEqual(c, last) {
			last, lastDet, quietFrom = c, d, now
		} else if now.Sub(quietFrom) >= settleQuiet {
			return last, lastDet, quietFrom, nil
		}
		if now.After(end) {
			res.notes = append(res.notes, fmt.Sprintf("still sending requests %s after %s", when, settleMax))
			return c, d, now, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitFor waits until done holds for every entry, printing progress to stderr every 5 s.
func waitFor(e *env, r row, names []string, budget time.Duration, what string, done func(entryObs) bool) bool {
	start := time.Now()
	end := start.Add(budget)
	nextLog := start.Add(5 * time.Second)
	for {
		count := 0
		for _, o := range e.obs.snapshot(names) {
			if done(o) {
				count++
			}
		}
		now := time.Now()
		if count == len(names) {
			logf("%s %s: %s %d/%d after %s", r.id, r.label, what, count, len(names), now.Sub(start).Round(100*time.Millisecond))
			return true
		}
		if now.After(end) {
			return false
		}
		if now.After(nextLog) {
			logf("%s %s: %s %d/%d (%s)", r.id, r.label, what, count, len(names), now.Sub(start).Round(time.Second))
			nextLog = now.Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notConverged says which entries did not reach what within budget.
func notConverged(e *env, names []string, budget time.Duration, short bool, what string, done func(entryObs) bool) string {
	var missing []string
	for _, o := range e.obs.snapshot(names) {
		if !done(o) {
			missing = append(missing, fmt.Sprintf("%s (entry ok %t, etcd-backup in %s %t, last operation %s)",
				o.name, o.entryOK, gardener.EntryNamespace(o.name), o.secretOK, orNone(o.state)))
		}
	}
	msg := fmt.Sprintf("%d of %d BackupEntries not %s within %s", len(missing), len(names), what, budget.Round(time.Second))
	if short {
		msg += " (the wait was cut short by go test's -timeout: run with -timeout 90m)"
	}
	if len(missing) > 10 {
		missing = append(missing[:10], "…")
	}
	return msg + ":\n  " + strings.Join(missing, "\n  ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// logf prints progress to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
