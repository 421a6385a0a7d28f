package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Worker feeds a function from its durable pull consumer on the stream of record.
type Worker struct {
	fn      Function
	js      jetstream.JetStream
	opts    workerOptions
	metrics *metrics
	log     *zap.Logger
	objects *keyLock
	waiting *waiting
	// firstFetch and firstSettled end the startup's phases once.
	firstFetch, firstSettled sync.Once
	// From the consumer, once Run has bound it.
	ackWait time.Duration
}

// NewWorker returns a worker for fn; metrics go to reg (nil: not registered).
func NewWorker(js jetstream.JetStream, fn Function, reg prometheus.Registerer, opts ...WorkerOption) (*Worker, error) {
	if err := fn.Validate(); err != nil {
		return nil, err
	}
	o := workerOptionsOf(opts)
	// An event waiting on an outage comes back within the back-off's cap; one that does not
	// for a few of those went to another replica.
	waits := newWaiting(fn.Name, 3*o.backoffMax+time.Minute)
	if reg != nil {
		waits = Register(reg, waits)
	}
	return &Worker{fn: fn, js: js, opts: o, metrics: newMetrics(reg), log: o.log.With(zap.String("function", fn.Name)), objects: newKeyLock(),
		waiting: waits}, nil
}

// Run binds to the function's durable consumer, which `housekeeper setup` created, and
// consumes until ctx is done; then it lets running handlers finish within the shutdown grace;
// handlers still running after it are cancelled and their events handed back.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := bindConsumer(ctx, w.js, w.fn)
	if err != nil {
		return err
	}
	w.opts.startup.Mark("consumer_bound")
	// The consumer's settings, so every replica dead-letters and heartbeats as it delivers.
	cfg := cons.CachedInfo().Config
	w.ackWait = cfg.AckWait
	stopAdvisories, err := w.watchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	defer stopAdvisories()

	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	slots := make(chan struct{}, w.opts.concurrency)
	var running sync.WaitGroup
	w.log.Info("consuming", zap.Strings("subjects", cfg.FilterSubjects), zap.Int("concurrency", w.opts.concurrency),
		zap.Duration("ack_wait", w.ackWait), zap.Int("max_deliver", cfg.MaxDeliver))

	var fails fetchFailures
	for ctx.Err() == nil {
		slots <- struct{}{} // wait for a free slot before taking a message
		free := 1 + w.opts.concurrency - len(slots)
		<-slots
		// Long poll, bounded so shutdown is noticed within two seconds.
		fetchCtx, cancelFetch := context.WithTimeout(ctx, 2*time.Second)
		batch, err := cons.Fetch(free, jetstream.FetchContext(fetchCtx))
		if err != nil {
			cancelFetch()
			if ctx.Err() == nil {
				sleep(ctx, fails.failed(w.log, "fetch failed", err))
			}
			continue
		}
		for msg := range batch.Messages() {
			w.firstFetch.Do(func() { w.opts.startup.Mark("first_fetch") })
			slots <- struct{}{}
			running.Go(func() {
				defer func() { <-slots }()
				w.handle(handlerCtx, msg)
				w.firstSettled.Do(func() {
					w.opts.startup.Mark("first_event_settled")
					w.opts.startup.Done()
				})
			})
		}
		err = batch.Error()
		timedOut := fetchCtx.Err() != nil // the long poll's own end is no failure
		cancelFetch()
		switch {
		case ctx.Err() != nil:
		case err != nil && !timedOut:
			// The server answered at once with an error (no consumer, no leader): without a
			// pause this loop would ask again and again, as fast as the server answers.
			sleep(ctx, fails.failed(w.log, "fetch ended with an error", err))
		default:
			fails.succeeded(w.log)
		}
	}

	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.opts.shutdownGrace):
		w.log.Warn("shutdown grace over: cancelling running handlers", zap.Duration("grace", w.opts.shutdownGrace))
		cancelHandlers()
		<-done
	}
	return nil
}

// handle runs the handler for one delivery and settles it: ack, nak with backoff, or dead
// letter and term.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		w.log.Error("message without JetStream metadata", zap.Error(err))
		return
	}
	tried := attempts(msg, meta)
	log := w.log.With(zap.Uint64("seq", meta.Sequence.Stream), zap.Uint64("delivery", tried))
	e, err := events.Decode(msg.Headers(), msg.Data())
	if err == nil && !w.fn.accepts(e.Type()) {
		err = fmt.Errorf("%w: function %s does not take %s", events.ErrUnknownType, w.fn.Name, e.Type())
	}
	if err != nil {
		w.metrics.failed.WithLabelValues(w.fn.Name, string(ClassPermanent)).Inc()
		w.deadLetter(ctx, log, msg, meta, events.CausePermanent, err.Error())
		return
	}
	log = log.With(zap.String("type", e.Type()), zap.String("id", e.ID()), zap.String("name", e.Subject()))

	stopHeartbeat := w.heartbeat(msg) // also while waiting for another event about the object
	unlock := w.objects.lock(objectKey(e))
	w.metrics.inFlight.WithLabelValues(w.fn.Name).Inc()
	start := time.Now()
	handlerCtx := ctx
	if f, ok := fireOf(msg.Headers(), meta); ok {
		handlerCtx = WithFire(ctx, f)
	}
	err = w.fn.Handler.Handle(handlerCtx, e)
	unlock()
	stopHeartbeat()
	w.metrics.duration.WithLabelValues(w.fn.Name).Observe(time.Since(start).Seconds())
	w.metrics.inFlight.WithLabelValues(w.fn.Name).Dec()

	class, settled := settle(err)
	outage, waitingSince := "", time.Time{}
	if class == ClassUnavailable {
		outage, waitingSince = outageOf(err), waitingSinceOf(msg)
		if waitingSince.IsZero() {
			waitingSince = start
		}
		w.waiting.wait(e.ID(), outage, waitingSince)
	} else {
		w.waiting.done(e.ID())
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down: hand the event to another worker now.
		_ = msg.Nak()
		w.metrics.handled.WithLabelValues(w.fn.Name, outcomeShutdown).Inc()
		log.Info("handed back at shutdown", zap.Error(err))
		return
	case err != nil:
		w.metrics.failed.WithLabelValues(w.fn.Name, string(class)).Inc()
	}
	switch settled.outcome {
	case outcomeSuccess:
		w.ackConfirmed(ctx, log, msg, "ack not confirmed; the event may be delivered again")
		log.Debug("handled", zap.Duration("took", time.Since(start)))
	case outcomeWaiting:
		w.ackConfirmed(ctx, log, msg, "ack not confirmed; the event may be delivered again")
		log.Info("waiting for another change", zap.Error(err))
	case outcomeDeadLetter:
		w.deadLetter(ctx, log, msg, meta, events.CausePermanent, err.Error())
		return // counted there, once the dead letter is stored
	case outcomeRetry:
		// The budget is a time: a failure of the function's own (not an outage) starts it, and
		// the event is retried until it has failed for retryBudget. An outage spends none of it.
		since := failingSince(msg)
		if settled.budgeted && since.IsZero() {
			since = start
		}
		if settled.budgeted && time.Since(since) >= w.opts.retryBudget {
			w.deadLetter(ctx, log, msg, meta, events.CauseTransient,
				fmt.Sprintf("gave up after failing for %s (%d deliveries): %v", time.Since(since).Round(time.Second), tried, err))
			return
		}
		delay := w.backoff(tried, err)
		if schedErr := w.scheduleRetry(handlerCtx, msg, tried, since, waitingSince, delay); schedErr != nil {
			log.Warn("cannot schedule the retry; holding the event instead", zap.Error(schedErr))
			if nakErr := msg.NakWithDelay(delay); nakErr != nil {
				log.Warn("nak failed; the event comes back after the ack wait", zap.Error(nakErr))
			}
		} else {
			w.ackConfirmed(ctx, log, msg, "ack not confirmed; the event may be delivered again besides its retry")
		}
		log.Info("will retry", zap.Duration("in", delay), zap.String("class", string(class)), zap.String("outage", outage), zap.Error(err))
	}
	w.metrics.handled.WithLabelValues(w.fn.Name, settled.outcome).Inc()
}

// ackConfirmed acknowledges msg and waits for the server to confirm it, trying again while the
// consumer's leader is being elected, for as long as the ack can still count (the ack wait): a
// lost ack has the event delivered again and its work done twice, a purge's listing or a
// snapshot of the whole etcd. A shutdown does not cut it short. unconfirmed is logged if it
// never is.
func (w *Worker) ackConfirmed(ctx context.Context, log *zap.Logger, msg jetstream.Msg, unconfirmed string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.ackWait)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := msg.DoubleAck(attempt)
		cancelAttempt()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return
		}
		select {
		case <-ctx.Done():
			log.Warn(unconfirmed, zap.Error(err))
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func (w *Worker) backoff(delivery uint64, err error) time.Duration {
	if d := retryAfterOf(err); d > 0 {
		return d
	}
	d := w.opts.backoffBase
	for i := uint64(1); i < delivery && d < w.opts.backoffMax; i++ {
		d *= 2
	}
	return min(d, w.opts.backoffMax)
}

// heartbeat tells JetStream the message is still being worked on, so only a dead worker's
// message is redelivered.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// deadLetter stores the event with its cause (events.CauseTransient or CausePermanent) and
// reason in the dead-letter stream, then terminates it. If the dead letter cannot be stored,
// the event is left to redelivery: nothing is lost.
func (w *Worker) deadLetter(ctx context.Context, log *zap.Logger, msg jetstream.Msg, meta *jetstream.MsgMetadata, cause, reason string) {
	dl := deadLetterMsg(w.fn.Name, cause, reason, msg.Subject(), meta.Sequence.Stream, attempts(msg, meta), msg.Headers(), msg.Data())
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.js.PublishMsg(pubCtx, dl); err != nil {
		log.Error("cannot store dead letter; leaving the event for redelivery", zap.String("reason", reason), zap.Error(err))
		_ = msg.NakWithDelay(w.opts.backoffBase)
		return
	}
	_ = msg.TermWithReason(truncate(reason, 256))
	w.metrics.handled.WithLabelValues(w.fn.Name, outcomeDeadLetter).Inc()
	log.Warn("dead-lettered", zap.String("cause", cause), zap.String("reason", reason))
}

// maxDeliveriesAdvisory is the part of JetStream's advisory that matters here.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchMaxDeliveries dead-letters events JetStream stopped delivering because no worker
// ever answered (a handler that crashes its process, or hangs past every ack wait). One
// replica of the function takes each advisory.
func (w *Worker) watchMaxDeliveries(ctx context.Context) (stop func(), err error) {
	nc := w.js.Conn()
	subject := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + events.RecordStream + "." + w.fn.Name
	sub, err := nc.QueueSubscribe(subject, w.fn.Name, func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			return
		}
		stream, err := w.js.Stream(ctx, events.RecordStream)
		if err != nil {
			return
		}
		raw, err := stream.GetMsg(ctx, adv.StreamSeq)
		if err != nil {
			w.log.Error("max deliveries reached, but the event cannot be read", zap.Uint64("seq", adv.StreamSeq), zap.Error(err))
			return
		}
		reason := fmt.Sprintf("delivered %d times without an answer (the worker crashed or hung past the ack wait)", adv.Deliveries)
		dl := deadLetterMsg(w.fn.Name, events.CausePermanent, reason, raw.Subject, adv.StreamSeq, adv.Deliveries, raw.Header, raw.Data)
		if _, err := w.js.PublishMsg(ctx, dl); err != nil {
			w.log.Error("cannot store dead letter", zap.Uint64("seq", adv.StreamSeq), zap.Error(err))
			return
		}
		w.metrics.handled.WithLabelValues(w.fn.Name, outcomeDeadLetter).Inc()
		w.log.Warn("dead-lettered", zap.Uint64("seq", adv.StreamSeq), zap.String("cause", events.CausePermanent), zap.String("reason", reason))
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// fetchFailures paces a worker whose fetches keep failing: the pause doubles from 100ms up to
// 5s, and the log says so at the first failure and then at each doubling of their count.
type fetchFailures struct{ n int }

func (f *fetchFailures) failed(log *zap.Logger, what string, err error) time.Duration {
	f.n++
	d := min(100*time.Millisecond<<min(f.n-1, 6), 5*time.Second)
	if f.n&(f.n-1) == 0 { // 1, 2, 4, 8, ...
		log.Warn(what+", retrying", zap.Error(err), zap.Int("failures", f.n), zap.Duration("retryIn", d))
	}
	return d
}

func (f *fetchFailures) succeeded(log *zap.Logger) {
	if f.n > 0 {
		log.Info("fetching again", zap.Int("afterFailures", f.n))
		f.n = 0
	}
}

// truncate cuts s to at most n bytes, the limits of NATS headers and acks, marking the cut
// with an ellipsis and never cutting inside a character. (A status's limits count characters:
// kube.Truncate.)
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	s = s[:n-len(ellipsis)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ellipsis
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
