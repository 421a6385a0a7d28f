package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// DefaultStateInterval is how often the leading bridge reads the state NATS holds.
const DefaultStateInterval = 30 * time.Second

// natsState is what NATS holds that no process measures: the functions scale to zero, the
// bridge is always on, so the leading bridge reads it and exports it (stateMetrics).
type natsState struct {
	// deadLetters counts the dead letters stored, by function. `housekeeper deadletters retry`
	// and `discard` delete them from the stream, so a resolved dead letter is no longer counted.
	deadLetters map[string]uint64
	// pending counts the purge schedule holders; oldestDue is the earliest one's due time
	// (zero: none pending).
	pending   int
	oldestDue time.Time
	// lastPurge is when the latest purge.completed report was stored (zero: none in the audit
	// stream's retention); unread if auditErr says why not.
	lastPurge time.Time
	auditErr  error
	// lost counts the messages each stream reports lost (a disk fault, a corrupt block).
	lost map[string]uint64
}

// stateReader reads natsState every interval while the bridge leads. A read is a few requests,
// whatever the events' rate: the streams' infos (filtered by subject), the last
// purge.completed report, and each pending purge's schedule holder (its due time is in its
// Nats-Schedule header).
type stateReader struct {
	js       jetstream.JetStream
	metrics  *stateMetrics
	interval time.Duration
	log      *zap.Logger
	// redrive re-drives the transient dead letters once the API server answers (synced) and
	// NATS does (the state was read): the causes an outage leaves are gone then.
	redrive func(context.Context) (int, error)
	synced  func() bool
	// seen are the functions with dead letters reported: reported as 0 once theirs are gone.
	seen map[string]bool
}

// run refreshes the metrics until ctx is done, then withdraws them: a bridge that no longer
// leads reports none of the state (the new leader does).
func (r *stateReader) run(ctx context.Context) error {
	r.metrics.leader.Set(1)
	defer r.withdraw()
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	failing, auditFailing := false, false
	for {
		rctx, cancel := context.WithTimeout(ctx, max(r.interval, 10*time.Second))
		s, err := readState(rctx, r.js)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// The last values stay: an unreachable NATS resolves no dead letter and fires no
			// purge.
			if !failing {
				r.log.Warn("reading dead letters and pending purges from NATS; the metrics keep the last values read", zap.Error(err))
			}
			failing = true
		default:
			if failing {
				r.log.Info("reading dead letters and pending purges from NATS again")
			}
			failing = false
			switch {
			case s.auditErr != nil && !auditFailing:
				r.log.Warn("reading the last completed purge from NATS; its metric keeps the last value read", zap.Error(s.auditErr))
			case s.auditErr == nil && auditFailing:
				r.log.Info("reading the last completed purge from NATS again")
			}
			auditFailing = s.auditErr != nil
			r.export(s)
			r.redriveTransient(ctx, s)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// redriveTransient re-drives the transient dead letters if there are any and the API server
// answers.
func (r *stateReader) redriveTransient(ctx context.Context, s natsState) {
	stored := uint64(0)
	for _, n := range s.deadLetters {
		stored += n
	}
	if stored == 0 || r.redrive == nil || !r.synced() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, max(r.interval, 10*time.Second))
	defer cancel()
	n, err := r.redrive(rctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("re-driving transient dead letters", zap.Int("redriven", n), zap.Error(err))
	case n > 0:
		r.log.Info("re-drove transient dead letters to their functions", zap.Int("redriven", n))
	}
}

func (r *stateReader) export(s natsState) {
	m := r.metrics
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	for fn := range s.deadLetters {
		r.seen[fn] = true
	}
	for fn := range r.seen {
		m.deadLetters.WithLabelValues(fn).Set(float64(s.deadLetters[fn]))
	}
	for stream, n := range s.lost {
		m.lostMessages.WithLabelValues(stream).Set(float64(n))
	}
	m.purgesPending.WithLabelValues().Set(float64(s.pending))
	if s.oldestDue.IsZero() {
		m.oldestDue.Reset()
	} else {
		m.oldestDue.WithLabelValues().Set(seconds(s.oldestDue))
	}
	switch {
	case s.auditErr != nil:
	case s.lastPurge.IsZero():
		m.lastPurgeDone.Reset()
	default:
		m.lastPurgeDone.WithLabelValues().Set(seconds(s.lastPurge))
	}
}

func (r *stateReader) withdraw() {
	m := r.metrics
	m.leader.Set(0)
	m.deadLetters.Reset()
	m.lostMessages.Reset()
	m.purgesPending.Reset()
	m.oldestDue.Reset()
	m.lastPurgeDone.Reset()
	r.seen = nil
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// readState reads natsState from the streams.
func readState(ctx context.Context, js jetstream.JetStream) (natsState, error) {
	s := natsState{deadLetters: map[string]uint64{}, lost: map[string]uint64{}}
	dl, err := js.Stream(ctx, events.DeadLetterStream)
	if err != nil {
		return s, fmt.Errorf("stream %s: %w", events.DeadLetterStream, err)
	}
	info, err := dl.Info(ctx, jetstream.WithSubjectFilter(events.SubjectDeadLetters))
	if err != nil {
		return s, fmt.Errorf("stream %s: %w", events.DeadLetterStream, err)
	}
	s.lost[events.DeadLetterStream] = lostMessages(info.State)
	prefix := events.DeadLetterSubject("")
	for subject, n := range info.State.Subjects {
		s.deadLetters[strings.TrimPrefix(subject, prefix)] += n
	}

	rec, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		return s, fmt.Errorf("stream %s: %w", events.RecordStream, err)
	}
	info, err = rec.Info(ctx, jetstream.WithSubjectFilter(events.SubjectPurgeSchedules))
	if err != nil {
		return s, fmt.Errorf("stream %s: %w", events.RecordStream, err)
	}
	s.lost[events.RecordStream] = lostMessages(info.State)
	for subject, n := range info.State.Subjects {
		if n == 0 {
			continue
		}
		holder, err := rec.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // fired since the info
		}
		if err != nil {
			return s, fmt.Errorf("purge schedule %s: %w", subject, err)
		}
		s.pending++
		if due, ok := scheduledAt(holder.Header.Get(jetstream.ScheduleHeader)); ok && (s.oldestDue.IsZero() || due.Before(s.oldestDue)) {
			s.oldestDue = due
		}
	}

	s.auditErr = readAudit(ctx, js, &s)
	return s, nil
}

// readAudit reads the audit stream's part of s: the last completed purge and the reports lost.
// Its error is s.auditErr, not readState's: the audit stream may be on one server that is down
// (events.WithAuditReplicas), and the dead letters and pending purges are read all the same.
func readAudit(ctx context.Context, js jetstream.JetStream, s *natsState) error {
	audit, err := js.Stream(ctx, events.AuditStream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", events.AuditStream, err)
	}
	completed, err := events.SubjectFilter(events.TypePurgeCompleted)
	if err != nil {
		return err
	}
	last, err := audit.GetLastMsgForSubject(ctx, completed)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("stream %s, last %s: %w", events.AuditStream, completed, err)
	default:
		s.lastPurge = last.Time
	}
	s.lost[events.AuditStream] = lostMessages(audit.CachedInfo().State)
	return nil
}

// lostMessages counts the messages a stream's state reports lost.
func lostMessages(state jetstream.StreamState) uint64 {
	if state.Lost == nil {
		return 0
	}
	return uint64(len(state.Lost.Msgs))
}

// scheduledAt is the time of a single schedule ("@at <RFC 3339>"), as functions/entry writes
// a purge's.
func scheduledAt(schedule string) (time.Time, bool) {
	at, ok := strings.CutPrefix(schedule, "@at ")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	return t, err == nil
}

// RunState exports the dead letters and pending purges NATS holds, read through js every
// Options.StateInterval, until ctx is done; run it while leading. Then the metrics are
// withdrawn and housekeeper_bridge_leader is 0. While the informers are synced, it re-drives
// the transient dead letters older than Options.RedriveAfter to their functions.
func (b *Bridge) RunState(ctx context.Context, js jetstream.JetStream) error {
	r := &stateReader{js: js, metrics: b.state, interval: b.opts.StateInterval, log: b.log, synced: b.Synced,
		redrive: func(ctx context.Context) (int, error) { return runner.RedriveTransient(ctx, js, b.opts.RedriveAfter) }}
	return r.run(ctx)
}
