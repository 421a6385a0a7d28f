package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// natsHarness is a real nats-server with housekeeper's streams.
type natsHarness struct {
	t   *testing.T
	env *testenv.Env
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newNATSHarness(t *testing.T) *natsHarness {
	t.Helper()
	return newNATSHarnessOn(t, testenv.WithNATS(), 1)
}

// newNATSHarnessOn is newNATSHarness on the nats-server nats starts, the streams replicated
// replicas times.
func newNATSHarnessOn(t *testing.T, nats testenv.Option, replicas int) *natsHarness {
	t.Helper()
	env := testenv.Start(t, nats)
	nc, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.WithReplicas(replicas)); err != nil {
		t.Fatal(err)
	}
	return &natsHarness{t: t, env: env, nc: nc, js: js}
}

// bucketEvent is an event about BackupBucket name at resourceVersion rv.
func bucketEvent(t testing.TB, op events.Operation, name string, rv int) cloudevents.Event {
	t.Helper()
	ref := events.Ref{Kind: events.KindBackupBucket, Name: name, UID: "uid-" + name, ResourceVersion: fmt.Sprint(rv), Generation: 1}
	e, err := events.NewObjectEvent("test", op, ref, []byte(`{"kind":"BackupBucket"}`))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// publish puts e on the stream and returns its sequence.
func (h *natsHarness) publish(e cloudevents.Event) uint64 {
	h.t.Helper()
	msg, err := events.Encode(e)
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := h.js.PublishMsg(context.Background(), msg)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// setUp creates or updates fn's consumer, as `housekeeper setup` does.
func (h *natsHarness) setUp(fn Function, s ConsumerSettings) {
	h.t.Helper()
	if _, err := EnsureConsumer(context.Background(), h.js, fn, s); err != nil {
		h.t.Fatal(err)
	}
}

// run sets up fn's consumer with the default settings and starts a worker for fn until the
// test ends.
func (h *natsHarness) run(fn Function, opts ...WorkerOption) *Worker {
	h.t.Helper()
	return h.runWith(fn, DefaultConsumerSettings(), opts...)
}

// runWith is run with consumer settings s.
func (h *natsHarness) runWith(fn Function, s ConsumerSettings, opts ...WorkerOption) *Worker {
	h.t.Helper()
	h.setUp(fn, s)
	opts = append([]WorkerOption{WithLogger(zaptest.NewLogger(h.t)), WithBackoff(200*time.Millisecond, 2*time.Second)}, opts...)
	w, err := NewWorker(h.js, fn, prometheus.NewRegistry(), opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return w
}

func (h *natsHarness) deadLetters(function string) []DeadLetter {
	h.t.Helper()
	dls, err := ListDeadLetters(context.Background(), h.js, function)
	if err != nil {
		h.t.Fatal(err)
	}
	return dls
}

// calls records handler invocations.
type calls struct {
	mu    sync.Mutex
	at    []time.Time
	ids   []string
	count chan struct{}
}

func newCalls() *calls { return &calls{count: make(chan struct{}, 1000)} }

func (c *calls) record(e cloudevents.Event) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Now())
	c.ids = append(c.ids, e.ID())
	c.count <- struct{}{}
	return len(c.at)
}

func (c *calls) wait(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for i := 0; i < n; i++ {
		select {
		case <-c.count:
		case <-deadline:
			t.Fatalf("handler called %d times within %s, want %d", i, timeout, n)
		}
	}
}

// noMore fails if the handler is called within the next interval, whatever calls it counted.
func (c *calls) noMore(t *testing.T, within time.Duration) {
	t.Helper()
	c.mu.Lock()
	before := len(c.at)
	c.mu.Unlock()
	time.Sleep(within)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.at) != before {
		t.Fatalf("handler called %d more times", len(c.at)-before)
	}
}

func (c *calls) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-c.count:
		t.Fatalf("handler called again")
	case <-time.After(within):
	}
}

func TestRetryableFailuresAreRetriedWithBackoffUntilSuccess(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	h.run(Function{Name: "flaky", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		if c.record(e) < 3 {
			return Retryable(errors.New("object store unavailable"))
		}
		return nil
	})})
	h.publish(bucketEvent(t, events.OpCreated, "b1", 1))
	c.wait(t, 3, 10*time.Second)
	c.none(t, time.Second)

	// backoff 200 ms · 2^(delivery-1): ≥ 200 ms before the 2nd delivery, ≥ 400 ms before the 3rd.
	if gap := c.at[1].Sub(c.at[0]); gap < 200*time.Millisecond {
		t.Errorf("2nd delivery %s after the 1st, want ≥ 200ms", gap)
	}
	if gap := c.at[2].Sub(c.at[1]); gap < 400*time.Millisecond {
		t.Errorf("3rd delivery %s after the 2nd, want ≥ 400ms", gap)
	}
	if dls := h.deadLetters("flaky"); len(dls) != 0 {
		t.Errorf("%d dead letters for an event that succeeded", len(dls))
	}
}

func TestPermanentFailureIsDeadLetteredOnceWithItsReason(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	h.run(Function{Name: "strict", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		return Permanentf("bucket name %q is not a valid container name", e.Subject())
	})})
	seq := h.publish(bucketEvent(t, events.OpCreated, "b2", 1))
	c.wait(t, 1, 10*time.Second)
	c.none(t, 2*time.Second)

	dls := h.deadLetters("strict")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	d := dls[0]
	if d.Reason != `bucket name "b2" is not a valid container name` || d.Cause != events.CausePermanent || d.StreamSequence != seq || d.Function != "strict" || d.EventType != events.TypeBucketCreated {
		t.Errorf("dead letter %+v", d)
	}
}

func TestInvalidEventsAreDeadLetteredWithoutCallingTheHandler(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	h.run(Function{Name: "picky", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		return nil
	})})
	msg := nats.NewMsg("housekeeper.backupbucket.created.broken")
	msg.Header.Set("ce-specversion", "0.3")
	msg.Data = []byte("{")
	if _, err := h.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.deadLetters("picky")) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	dls := h.deadLetters("picky")
	if len(dls) != 1 || dls[0].Reason != `invalid event: header ce-specversion is "0.3", want "1.0"` {
		t.Fatalf("dead letters %+v", dls)
	}
	c.none(t, 500*time.Millisecond)
}

// Events waiting for a retry hold none of the consumer's max-ack-pending slots: with every
// slot's worth of events failing and retrying late, a new event is still handled at once.
func TestRetriesWaitingDoNotStarveOtherEvents(t *testing.T) {
	h := newNATSHarness(t)
	failing, handled := newCalls(), newCalls()
	settings := DefaultConsumerSettings()
	settings.MaxAckPending = 2
	h.runWith(Function{Name: "patient", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		if strings.HasPrefix(e.Subject(), "failing-") {
			failing.record(e)
			return Retryable(errors.New("object store unavailable"))
		}
		handled.record(e)
		return nil
	})}, settings, WithBackoff(time.Minute, time.Minute))
	h.publish(bucketEvent(t, events.OpCreated, "failing-1", 1))
	h.publish(bucketEvent(t, events.OpCreated, "failing-2", 1))
	failing.wait(t, 2, 10*time.Second)

	h.publish(bucketEvent(t, events.OpCreated, "healthy", 1))
	handled.wait(t, 1, 10*time.Second)

	cons, err := h.js.Consumer(context.Background(), events.RecordStream, "patient")
	if err != nil {
		t.Fatal(err)
	}
	// The handler records a call before the worker schedules its retry and acks it: within
	// seconds, far inside the minute the retries wait, no slot may stay taken.
	testenv.Eventually(t, 5*time.Second, "no ack-pending slot held while the retries wait", func() (bool, string) {
		info, err := cons.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 0, fmt.Sprintf("%d events hold ack-pending slots", info.NumAckPending)
	})
}

// The retry budget is a time across the copies the retries are: an event that keeps failing for
// a cause of the function's own is retried until it has failed for the budget, then
// dead-lettered as transient with how long and how often it was tried.
func TestRetryBudgetIsATimeAcrossCopies(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	const budget = 2500 * time.Millisecond
	h.runWith(Function{Name: "counted", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		return errors.New("still failing")
	})}, DefaultConsumerSettings(), WithBackoff(50*time.Millisecond, 100*time.Millisecond), WithRetryBudget(budget))
	h.publish(bucketEvent(t, events.OpCreated, "b4", 1))
	var dls []DeadLetter
	testenv.Eventually(t, 20*time.Second, "the event dead-lettered", func() (bool, string) {
		dls = h.deadLetters("counted")
		return len(dls) > 0, fmt.Sprintf("%d dead letters", len(dls))
	})
	c.noMore(t, 2*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	d := dls[0]
	if len(dls) != 1 || d.Cause != events.CauseTransient || !strings.HasPrefix(d.Reason, "gave up after failing for ") ||
		!strings.HasSuffix(d.Reason, fmt.Sprintf("(%d deliveries): still failing", len(c.at))) || d.Deliveries != uint64(len(c.at)) {
		t.Fatalf("dead letters %+v after %d calls", dls, len(c.at))
	}
	// The server schedules in whole seconds: three retries at least fit in 2.5 s of failing.
	if failed := c.at[len(c.at)-1].Sub(c.at[0]); failed < budget || len(c.at) < 3 {
		t.Errorf("dead-lettered after %d calls over %s, want at least the budget %s", len(c.at), failed, budget)
	}
	for _, id := range c.ids {
		if id != c.ids[0] {
			t.Errorf("retries carry event ids %v, want the original's", c.ids)
			break
		}
	}
}

// An outage of a dependency (the API server refusing connections) spends none of the retry
// budget: "recovers" fails for it for longer than the budget and is then handled; "fails-after"
// fails for it, then for a reason of its own, and is dead-lettered only once those have lasted
// the budget.
func TestOutagesDoNotSpendTheRetryBudget(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	const budget = 2500 * time.Millisecond
	refused := &url.Error{Op: "Get", URL: "https://kube-apiserver:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	var mu sync.Mutex
	tries := map[string]int{}
	var ownFailures []time.Time
	h.runWith(Function{Name: "outlasting", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		mu.Lock()
		defer mu.Unlock()
		tries[e.Subject()]++
		n := tries[e.Subject()]
		switch {
		case e.Subject() == "recovers" && n <= 5, e.Subject() == "fails-after" && n <= 4:
			return fmt.Errorf("reading the bucket: %w", refused)
		case e.Subject() == "recovers":
			return nil
		default:
			ownFailures = append(ownFailures, time.Now())
			return errors.New("still failing")
		}
	})}, DefaultConsumerSettings(), WithBackoff(50*time.Millisecond, 100*time.Millisecond), WithRetryBudget(budget))
	h.publish(bucketEvent(t, events.OpCreated, "recovers", 1))
	h.publish(bucketEvent(t, events.OpCreated, "fails-after", 1))
	var dls []DeadLetter
	testenv.Eventually(t, 30*time.Second, "fails-after dead-lettered", func() (bool, string) {
		dls = h.deadLetters("outlasting")
		return len(dls) > 0, fmt.Sprintf("%d dead letters", len(dls))
	})
	c.noMore(t, 2*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if tries["recovers"] != 6 {
		t.Errorf("recovers handled %d times, want 6 (5 outages, then success)", tries["recovers"])
	}
	if len(dls) != 1 || dls[0].Cause != events.CauseTransient || !strings.HasSuffix(dls[0].Reason, "still failing") {
		t.Fatalf("dead letters %+v, want only fails-after's", dls)
	}
	if len(ownFailures) < 3 || ownFailures[len(ownFailures)-1].Sub(ownFailures[0]) < budget {
		t.Errorf("fails-after dead-lettered after %d failures of its own, want them to last the budget %s", len(ownFailures), budget)
	}
}

// A dependency's outage is retried at most DefaultBackoffMax apart, however long it lasts, so
// work resumes within that of the dependency's return; a Retry-After the dependency gave wins.
func TestBackoffIsCappedLow(t *testing.T) {
	w := &Worker{opts: workerOptionsOf(nil)}
	if d := w.backoff(100, errors.New("refused")); d != DefaultBackoffMax || d > time.Minute {
		t.Errorf("100th delivery waits %s, want %s", d, DefaultBackoffMax)
	}
	if d := w.backoff(3, errors.New("refused")); d != 4*time.Second {
		t.Errorf("3rd delivery waits %s, want 4s", d)
	}
	if d := w.backoff(100, RetryAfter(7*time.Second, errors.New("throttled"))); d != 7*time.Second {
		t.Errorf("Retry-After 7s: waits %s", d)
	}
}

func TestReplayRedeliversExactlyTheWindowToOneFunction(t *testing.T) {
	h := newNATSHarness(t)
	a, b := newCalls(), newCalls()
	fnA := Function{Name: "fn-a", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error { a.record(e); return nil })}
	fnB := Function{Name: "fn-b", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error { b.record(e); return nil })}
	h.run(fnA)
	h.run(fnB)
	var seqs []uint64
	var ids []string
	for i := range 10 {
		e := bucketEvent(t, events.OpCreated, fmt.Sprintf("r%d", i), 1)
		ids = append(ids, e.ID())
		seqs = append(seqs, h.publish(e))
	}
	a.wait(t, 10, 10*time.Second)
	b.wait(t, 10, 10*time.Second)

	res, err := Replay(context.Background(), h.js, fnA.Name, Window{FromSeq: seqs[3], UntilSeq: seqs[6]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 4 || res.FirstSeq != seqs[3] || res.LastSeq != seqs[6] {
		t.Fatalf("replay result %+v, want sequences %d..%d", res, seqs[3], seqs[6])
	}
	a.wait(t, 4, 10*time.Second)
	a.none(t, time.Second)
	b.none(t, 0)
	a.mu.Lock()
	replayed := slices.Clone(a.ids[10:])
	a.mu.Unlock()
	slices.Sort(replayed) // handled concurrently: in any order
	want := slices.Clone(ids[3:7])
	slices.Sort(want)
	if !slices.Equal(replayed, want) {
		t.Errorf("replayed ids %v, want %v", replayed, want)
	}
}

func TestReplaySinceTime(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	fn := Function{Name: "fn-t", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error { c.record(e); return nil })}
	h.run(fn)
	h.publish(bucketEvent(t, events.OpCreated, "old", 1))
	time.Sleep(1100 * time.Millisecond)
	since := time.Now()
	h.publish(bucketEvent(t, events.OpCreated, "new1", 1))
	h.publish(bucketEvent(t, events.OpCreated, "new2", 1))
	res, err := Replay(context.Background(), h.js, fn.Name, Window{Since: since}, nil)
	if err != nil || res.Redriven != 2 {
		t.Fatalf("replay since %s: %+v %v, want 2 events", since, res, err)
	}
}

func TestDeadLetterRetryRedrivesToTheFunction(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	var fixed sync.Mutex
	broken := true
	h.run(Function{Name: "fixable", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		fixed.Lock()
		defer fixed.Unlock()
		if broken {
			return Permanentf("secret has no storageKey")
		}
		return nil
	})})
	e := bucketEvent(t, events.OpCreated, "b4", 1)
	h.publish(e)
	c.wait(t, 1, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for len(h.deadLetters("fixable")) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	dls := h.deadLetters("fixable")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}

	fixed.Lock()
	broken = false
	fixed.Unlock()
	if err := RetryDeadLetter(context.Background(), h.js, dls[0]); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 1, 10*time.Second)
	c.mu.Lock()
	if c.ids[1] != e.ID() {
		t.Errorf("re-driven event id %s, want %s", c.ids[1], e.ID())
	}
	c.mu.Unlock()
	if left := h.deadLetters("fixable"); len(left) != 0 {
		t.Errorf("%d dead letters left after retry", len(left))
	}
}

func TestWaitingErrorsAreSettledWithoutRetryOrDeadLetter(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	h.run(Function{Name: "patient", Types: []string{events.TypeBucketDeleting}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		return Waiting(errors.New("BackupEntries shoot--a--b--1 still reference the bucket"))
	})})
	h.publish(bucketEvent(t, events.OpDeleting, "b5", 1))
	c.wait(t, 1, 10*time.Second)
	c.none(t, 1500*time.Millisecond)
	if dls := h.deadLetters("patient"); len(dls) != 0 {
		t.Errorf("%d dead letters for a waiting object", len(dls))
	}
}

// Transient dead letters (the retry budget spent) are re-driven by RedriveTransient and resolve
// once their cause is gone; permanent ones, and transient ones younger than asked, stay.
func TestRedriveTransientResolvesOnlyTransientDeadLetters(t *testing.T) {
	h := newNATSHarness(t)
	c := newCalls()
	var mu sync.Mutex
	away := true
	h.runWith(Function{Name: "recovering", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		c.record(e)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Subject() == "invalid":
			return Permanentf("bucket name %q is not a valid container name", e.Subject())
		case away:
			return errors.New("the store answered 500")
		}
		return nil
	})}, DefaultConsumerSettings(), WithBackoff(50*time.Millisecond, 100*time.Millisecond), WithRetryBudget(time.Second))
	h.publish(bucketEvent(t, events.OpCreated, "flaky", 1))
	h.publish(bucketEvent(t, events.OpCreated, "invalid", 1))
	testenv.Eventually(t, 20*time.Second, "both dead-lettered", func() (bool, string) {
		n := len(h.deadLetters("recovering"))
		return n == 2, fmt.Sprintf("%d dead letters", n)
	})
	if n, err := RedriveTransient(context.Background(), h.js, time.Hour); err != nil || n != 0 {
		t.Fatalf("RedriveTransient of letters younger than an hour: %d re-driven, %v; want none", n, err)
	}
	mu.Lock()
	away = false
	mu.Unlock()
	n, err := RedriveTransient(context.Background(), h.js, 0)
	if err != nil || n != 1 {
		t.Fatalf("RedriveTransient: %d re-driven, %v; want 1", n, err)
	}
	testenv.Eventually(t, 10*time.Second, "only the permanent dead letter left", func() (bool, string) {
		left := h.deadLetters("recovering")
		return len(left) == 1 && left[0].Cause == events.CausePermanent, fmt.Sprintf("%+v", left)
	})
}

// Dead letters stored before they carried their cause: a function that gave up retrying left a
// transient one, anything else is permanent.
func TestCauseOfDeadLettersWithoutTheHeader(t *testing.T) {
	for reason, want := range map[string]string{
		"gave up after 10 deliveries: Get \"https://kube-apiserver\": connection refused":     events.CauseTransient,
		"delivered 20 times without an answer (the worker crashed or hung past the ack wait)": events.CausePermanent,
		"secret has no storageKey": events.CausePermanent,
	} {
		if got := causeOf("", reason); got != want {
			t.Errorf("%q: %s, want %s", reason, got, want)
		}
	}
	if got := causeOf(events.CausePermanent, "gave up after 3 deliveries: x"); got != events.CausePermanent {
		t.Errorf("the header says permanent: %s", got)
	}
}
