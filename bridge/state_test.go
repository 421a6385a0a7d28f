package bridge

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The leading bridge exports what NATS holds, read as the bridge's own NATS identity on a
// nats-server that loads `housekeeper nats-auth`'s permissions: the dead letters stored per
// function (down to 0 once `deadletters retry` re-drove one and `discard` removed the other), the
// pending purges — scheduled as the entry function schedules them, rescheduled, fired — with
// the earliest due time, and when the last purge completed. Leadership lost, it withdraws them.
func TestStateMetricsReadFromNATS(t *testing.T) {
	as := startAuthorizingNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bridgeJS, entryJS, purgeJS, bucketJS, operatorJS := as(events.IdentityBridge), as("entry"), as("purge"), as("bucket"), as(events.IdentityOperator)

	reg := prometheus.NewRegistry()
	r := &stateReader{js: bridgeJS, metrics: newStateMetrics(reg), interval: 100 * time.Millisecond, log: zaptest.NewLogger(t)}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.run(runCtx) }()
	defer stop()

	// Nothing stored yet: no purge pending, no dead letter, no purge done; this bridge leads.
	eventually(t, reg, "an empty state", map[string]string{
		"housekeeper_bridge_leader": "1", "housekeeper_purges_pending": "0",
		"housekeeper_purges_oldest_due_timestamp_seconds": "", "housekeeper_purge_last_success_timestamp_seconds": "",
		`housekeeper_deadletter_messages{function="bucket"}`: "",
	})

	now := time.Now().Truncate(time.Millisecond)
	schedule := func(entry string, at time.Time) {
		t.Helper()
		data := events.PurgeData{Entry: entry, UID: "uid-" + entry, BucketName: "b", Prefix: entry + "/", DueAt: at}
		e, err := events.NewPurgeEvent("test", events.OpPurgeDue, events.Ref{Name: entry, UID: "uid-" + entry}, data, now)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		// As functions/entry publishPurge schedules one.
		opts := events.Schedule(msg, events.PurgeScheduleSubject(entry))
		msg.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
		if _, err := entryJS.PublishMsg(ctx, msg, append(opts, jetstream.WithScheduleTTL(time.Hour))...); err != nil {
			t.Fatal(err)
		}
	}
	dueA, dueB := now.Add(2*time.Hour), now.Add(time.Hour)
	schedule("shoot--a--one", dueA)
	schedule("shoot--b--two", dueB)
	schedule("shoot--c--three", now.Add(3*time.Hour))
	eventually(t, reg, "three purges pending, the earliest due in an hour", map[string]string{
		"housekeeper_purges_pending": "3", "housekeeper_purges_oldest_due_timestamp_seconds": stamp(dueB),
	})
	// Rescheduled later (a longer retention): the earliest is now the other one's.
	schedule("shoot--b--two", now.Add(4*time.Hour))
	eventually(t, reg, "the rescheduled purge no longer the earliest", map[string]string{
		"housekeeper_purges_pending": "3", "housekeeper_purges_oldest_due_timestamp_seconds": stamp(dueA),
	})
	// One comes due: the server fires it and removes its holder.
	soon := time.Now().Add(3 * time.Second)
	schedule("shoot--e--soon", soon)
	eventually(t, reg, "a fourth purge, due in seconds", map[string]string{
		"housekeeper_purges_pending": "4", "housekeeper_purges_oldest_due_timestamp_seconds": stamp(soon),
	})
	eventually(t, reg, "the purge due soon fired", map[string]string{
		"housekeeper_purges_pending": "3", "housekeeper_purges_oldest_due_timestamp_seconds": stamp(dueA),
	})

	// A purge completes: its report's stored time (in the audit stream) is the last success.
	completed, err := events.NewPurgeEvent("test", events.OpPurgeCompleted, events.Ref{Name: "shoot--d--four", UID: "uid-d"},
		events.PurgeData{Entry: "shoot--d--four", UID: "uid-d", BucketName: "b", Prefix: "shoot--d--four/", DueAt: now}, now)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.Encode(completed)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := purgeJS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != events.AuditStream {
		t.Fatalf("the purge's report was stored in %s, want %s", ack.Stream, events.AuditStream)
	}
	stored, err := bridgeStreamMsg(ctx, bridgeJS, ack.Stream, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "the last purge completed", map[string]string{
		"housekeeper_purge_last_success_timestamp_seconds": stamp(stored.Time),
	})

	// Dead letters, stored as a function stores them (one per original message).
	deadLetter := func(function string, seq int) {
		t.Helper()
		m := nats.NewMsg(events.DeadLetterSubject(function))
		m.Header.Set(events.HeaderFunction, function)
		m.Header.Set(events.HeaderReason, "permanent: test")
		m.Header.Set(events.HeaderSubject, "housekeeper.backupbucket.created.b")
		m.Header.Set(events.HeaderStreamSequence, strconv.Itoa(seq))
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s/%d", function, seq))
		m.Data = []byte("{}")
		if _, err := bucketJS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	deadLetter("bucket", 1)
	deadLetter("bucket", 2)
	eventually(t, reg, "two dead letters of bucket", map[string]string{`housekeeper_deadletter_messages{function="bucket"}`: "2"})

	// Resolved as the operator resolves them: one retried (re-driven, then deleted from the
	// dead-letter stream), one discarded. The gauge stays, at 0.
	dls, err := runner.ListDeadLetters(ctx, operatorJS, "bucket")
	if err != nil || len(dls) != 2 {
		t.Fatalf("dead letters: %v, %v", dls, err)
	}
	if err := runner.RetryDeadLetter(ctx, operatorJS, dls[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "one dead letter left after a retry", map[string]string{`housekeeper_deadletter_messages{function="bucket"}`: "1"})
	if err := runner.DiscardDeadLetter(ctx, operatorJS, dls[1].Sequence); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "no dead letter left", map[string]string{`housekeeper_deadletter_messages{function="bucket"}`: "0"})

	// Leadership lost: the state is withdrawn.
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"housekeeper_bridge_leader": "0", "housekeeper_purges_pending": "", "housekeeper_purges_oldest_due_timestamp_seconds": "",
		"housekeeper_purge_last_success_timestamp_seconds": "", `housekeeper_deadletter_messages{function="bucket"}`: "",
	}
	if got := gathered(t, reg); !matches(got, want) {
		t.Errorf("after leading: %v, want %v", got, want)
	}
}

// bridgeStreamMsg reads message seq of stream as the bridge may.
func bridgeStreamMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (*jetstream.RawStreamMsg, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.GetMsg(ctx, seq)
}

func stamp(t time.Time) string { return strconv.FormatFloat(seconds(t), 'f', 3, 64) }

// gathered are reg's gauges as "name{label=\"value\"}" → value with three decimals.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			out[seriesName(f.GetName(), m)] = strconv.FormatFloat(m.GetGauge().GetValue(), 'f', 3, 64)
		}
	}
	return out
}

func seriesName(name string, m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return name
	}
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

// matches says whether got has every series of want at its value ("" for absent; integers
// compare as such).
func matches(got, want map[string]string) bool {
	for name, v := range want {
		g, ok := got[name]
		switch {
		case v == "" && ok, v != "" && !ok:
			return false
		case v != "" && strings.TrimSuffix(g, ".000") != strings.TrimSuffix(v, ".000"):
			return false
		}
	}
	return true
}

func eventually(t *testing.T, reg *prometheus.Registry, what string, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, func() (bool, string) {
		got := gathered(t, reg)
		return matches(got, want), fmt.Sprint(got)
	})
}

// The leading bridge, as its own NATS identity, re-drives a transient dead letter (its retry
// budget spent) to its function once the API server answers, and leaves a permanent one.
func TestBridgeRedrivesTransientDeadLettersAsItsOwnIdentity(t *testing.T) {
	as := startAuthorizingNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bridgeJS, bucketJS, operatorJS := as(events.IdentityBridge), as("bucket"), as(events.IdentityOperator)
	for seq, cause := range map[int]string{1: events.CauseTransient, 2: events.CausePermanent} {
		m := nats.NewMsg(events.DeadLetterSubject("bucket"))
		m.Header.Set("ce-id", fmt.Sprintf("event-%d", seq))
		m.Header.Set("ce-type", events.TypeBucketCreated)
		m.Header.Set(events.HeaderFunction, "bucket")
		m.Header.Set(events.HeaderCause, cause)
		m.Header.Set(events.HeaderReason, cause+": test")
		m.Header.Set(events.HeaderFailedAt, time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano))
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("bucket/%d", seq))
		m.Data = []byte("{}")
		if _, err := bucketJS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	synced := false
	r := &stateReader{js: bridgeJS, metrics: newStateMetrics(reg), interval: 100 * time.Millisecond, log: zaptest.NewLogger(t),
		synced:  func() bool { return synced },
		redrive: func(ctx context.Context) (int, error) { return runner.RedriveTransient(ctx, bridgeJS, time.Minute) }}
	// Not synced (the API server away): nothing is re-driven.
	s, err := readState(ctx, bridgeJS)
	if err != nil {
		t.Fatal(err)
	}
	r.redriveTransient(ctx, s)
	if dls, err := runner.ListDeadLetters(ctx, operatorJS, "bucket"); err != nil || len(dls) != 2 {
		t.Fatalf("while the API server is away: %d dead letters (%v), want both kept", len(dls), err)
	}
	synced = true
	r.redriveTransient(ctx, s)
	dls, err := runner.ListDeadLetters(ctx, operatorJS, "bucket")
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Cause != events.CausePermanent {
		t.Fatalf("dead letters left %+v, want only the permanent one", dls)
	}
	stream, err := operatorJS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.RedriveSubject("bucket")))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Subjects[events.RedriveSubject("bucket")]; got != 1 {
		t.Errorf("%d events re-driven to the bucket function, want the transient one", got)
	}
}

// startAuthorizingNATS starts a nats-server that loads `housekeeper nats-auth`'s permissions,
// with the streams, and returns how to connect as one of its identities.
func startAuthorizingNATS(t *testing.T) func(identity string) jetstream.JetStream {
	t.Helper()
	n, issued, err := natsauth.Start(filepath.Join(t.TempDir(), "nats"), natsconn.FormConfig, cli.Permissions(), true, nil)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(n.Stop)
	as := func(identity string) jetstream.JetStream {
		nc, err := natsconn.Connect(issued.Options(n.URL, identity), identity, "test-"+identity, zap.NewNop())
		if err != nil {
			t.Fatalf("%s: %v", identity, err)
		}
		t.Cleanup(nc.Close)
		js, err := natsconn.NewJetStream(nc, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, as(events.IdentitySetup)); err != nil {
		t.Fatal(err)
	}
	return as
}

// The bridge reads the last event of every object with its own rights, as often as its terms
// start: the newest event per object counts, an object whose last event is its deletion is
// forgotten.
func TestRecallReadsEveryObjectsLastEventAsItsOwnIdentity(t *testing.T) {
	as := startAuthorizingNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := as(events.IdentityBridge)
	kept, gone := entry("shoot--dev--kept--1", "azure"), entry("shoot--dev--gone--2", "azure")
	kept.UID, gone.UID = "uid-kept", "uid-gone"
	publish := func(op events.Operation, e *extensionsv1alpha1.BackupEntry, rv, inputs string) {
		t.Helper()
		e.ResourceVersion = rv
		ev, err := objectEvent(cluster, events.KindBackupEntry, op, e, events.WithInputs(inputs))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	publish(events.OpCreated, kept, "1", "first")
	publish(events.OpSynced, kept, "2", "second")
	publish(events.OpCreated, gone, "3", "third")
	publish(events.OpDeleted, gone, "4", "fourth")
	for term := range 2 {
		last, err := readLastInputs(ctx, js.(recordReader))
		if err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		if want := map[string]string{"BackupEntry/uid-kept": "second"}; !maps.Equal(last, want) {
			t.Errorf("term %d: last inputs %v, want %v", term, last, want)
		}
	}
}

// The audit stream has replicas of its own, one by default: while it cannot be read, the last
// completed purge keeps its value and says so once in the log, and the dead letters and pending
// purges are read all the same.
func TestStateWithoutTheAuditStream(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	r := &stateReader{js: js, metrics: newStateMetrics(reg), interval: 100 * time.Millisecond, log: zap.New(core)}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.run(runCtx) }()

	now := time.Now()
	completed, err := events.NewPurgeEvent("test", events.OpPurgeCompleted, events.Ref{Name: "shoot--a--done", UID: "uid-a"},
		events.PurgeData{Entry: "shoot--a--done", UID: "uid-a", BucketName: "b", Prefix: "shoot--a--done/", DueAt: now}, now)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.Encode(completed)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := bridgeStreamMsg(ctx, js, events.AuditStream, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	last := stamp(stored.Time)
	eventually(t, reg, "the last purge completed", map[string]string{"housekeeper_purge_last_success_timestamp_seconds": last})

	if err := js.DeleteStream(ctx, events.AuditStream); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(events.DeadLetterSubject("entry"))
	m.Data = []byte("{}")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "a dead letter read without the audit stream", map[string]string{
		`housekeeper_deadletter_messages{function="entry"}`: "1", "housekeeper_purge_last_success_timestamp_seconds": last,
	})
	if n := logs.FilterMessage("reading the last completed purge from NATS; its metric keeps the last value read").Len(); n != 1 {
		t.Errorf("%d warnings that the audit stream cannot be read, want 1: %v", n, logs.All())
	}

	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	eventually(t, reg, "the audit stream read again, empty", map[string]string{"housekeeper_purge_last_success_timestamp_seconds": ""})
	testenv.Eventually(t, 5*time.Second, "the log saying so", func() (bool, string) {
		n := logs.FilterMessage("reading the last completed purge from NATS again").Len()
		return n == 1, fmt.Sprintf("%d", n)
	})
}
