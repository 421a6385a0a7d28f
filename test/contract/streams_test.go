package contract

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The contract's streams, de-duplication and schedules on a real nats-server.

const (
	testCluster  = "garden-eu1"
	testEntryUID = "5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c"
)

// testNow is the due time the purge events.events name.
var testNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

var (
	testBucket     = events.Ref{Kind: events.KindBackupBucket, Name: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", UID: "9e8d7c6b-5a49-4382-a716-2b3c4d5e6f70", ResourceVersion: "1007", Generation: 1}
	testBucketData = []byte(`{"kind":"BackupBucket","apiVersion":"extensions.gardener.cloud/v1alpha1","metadata":{"name":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"}}`)
)

func mustEncode(t *testing.T, e cloudevents.Event) *nats.Msg {
	t.Helper()
	msg, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func cloneHeader(h nats.Header) nats.Header {
	c := make(nats.Header, len(h))
	for k, v := range maps.All(h) {
		c[k] = slices.Clone(v)
	}
	return c
}

// streamEnv is a real nats-server with JetStream and the housekeeper streams.
func streamEnv(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	return ctx, js
}

func TestEnsureStreams(t *testing.T) {
	ctx, js := streamEnv(t)
	record, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	info := record.CachedInfo()
	cfg := info.Config
	if cfg.Retention != jetstream.LimitsPolicy || !cfg.AllowMsgSchedules || !cfg.AllowMsgTTL ||
		cfg.Duplicates != 10*time.Minute || cfg.MaxAge != events.DefaultMaxAge || !slices.Equal(cfg.Subjects, []string{events.SubjectAll}) {
		t.Errorf("record stream as the server has it: %+v", cfg)
	}
	dl, err := js.Stream(ctx, events.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := dl.CachedInfo().Config; c.Retention != jetstream.LimitsPolicy || c.MaxAge != events.DefaultDeadLetterMaxAge {
		t.Errorf("dead-letter stream as the server has it: %+v", c)
	}
	audit, err := js.Stream(ctx, events.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := audit.CachedInfo().Config; c.Retention != jetstream.LimitsPolicy || c.MaxAge != events.DefaultMaxAge || c.Replicas != 1 ||
		!slices.Equal(c.Subjects, []string{events.SubjectAudit}) {
		t.Errorf("audit stream as the server has it: %+v", c)
	}

	// Events, dead letters and reports go to their own streams.
	bucketCreated, err := events.NewObjectEvent(testCluster, events.OpCreated, testBucket, testBucketData)
	if err != nil {
		t.Fatal(err)
	}
	msg := mustEncode(t, bucketCreated)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil || ack.Stream != events.RecordStream {
		t.Fatalf("publishing an event: %+v, %v", ack, err)
	}
	if ack, err := js.Publish(ctx, events.DeadLetterSubject("purge"), []byte("x")); err != nil || ack.Stream != events.DeadLetterStream {
		t.Fatalf("publishing a dead letter: %+v, %v", ack, err)
	}
	completed, err := events.NewPurgeEvent(testCluster, events.OpPurgeCompleted, events.Ref{Kind: events.KindBackupEntry, Name: "shoot--dev--app", UID: "1"},
		events.PurgeData{Entry: "shoot--dev--app", UID: "1", BucketName: testBucket.Name, Prefix: "shoot--dev--app"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	report := mustEncode(t, completed)
	if ack, err := js.PublishMsg(ctx, report); err != nil || ack.Stream != events.AuditStream || events.StreamOf(report.Subject) != events.AuditStream {
		t.Fatalf("publishing a report: %+v, %v", ack, err)
	}

	// Again, from another process: no error, same streams, messages kept, and no update at
	// all (the server announces every update).
	updates, err := js.Conn().SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatalf("second events.EnsureStreams: %v", err)
	}
	if m, err := updates.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("second events.EnsureStreams updated an unchanged stream: %s", m.Subject)
	}
	again, err := record.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Created.Equal(info.Created) || again.State.Msgs != 1 {
		t.Errorf("second events.EnsureStreams recreated or emptied the stream: created %s → %s, %d messages",
			info.Created, again.Created, again.State.Msgs)
	}
	if again.Config.Duplicates != cfg.Duplicates || again.Config.MaxAge != cfg.MaxAge || !again.Config.AllowMsgSchedules {
		t.Errorf("second events.EnsureStreams changed the configuration: %+v", again.Config)
	}
	var names []string
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		names = append(names, name)
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{events.RecordStream, events.AuditStream, events.DeadLetterStream}) {
		t.Errorf("streams %v", names)
	}

	// A changed option updates the stream in place.
	if err := events.EnsureStreams(ctx, js, events.WithMaxAge(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := updates.NextMsg(2 * time.Second); err != nil {
		t.Errorf("no update advisory for a changed max age: %v", err)
	}
	updated, err := record.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Config.MaxAge != 48*time.Hour || !updated.Created.Equal(info.Created) || updated.State.Msgs != 1 {
		t.Errorf("WithMaxAge(48h): max age %s, created %s, %d messages", updated.Config.MaxAge, updated.Created, updated.State.Msgs)
	}
}

// events.CheckStreams names the stream that is missing and points at the setup; once the setup ran, it
// is content.
func TestCheckStreams(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := events.CheckStreams(ctx, js)
	if !errors.Is(err, events.ErrNotSetUp) || !strings.Contains(err.Error(), "stream "+events.RecordStream+" does not exist") ||
		!strings.Contains(err.Error(), "housekeeper setup") {
		t.Errorf("no streams: %v", err)
	}
	if _, err := js.CreateStream(ctx, events.StreamConfigs().Record); err != nil {
		t.Fatal(err)
	}
	if err := events.CheckStreams(ctx, js); !errors.Is(err, events.ErrNotSetUp) || !strings.Contains(err.Error(), "stream "+events.DeadLetterStream+" does not exist") {
		t.Errorf("no dead-letter stream: %v", err)
	}
	if _, err := js.CreateStream(ctx, events.StreamConfigs().DeadLetter); err != nil {
		t.Fatal(err)
	}
	if err := events.CheckStreams(ctx, js); !errors.Is(err, events.ErrNotSetUp) || !strings.Contains(err.Error(), "stream "+events.AuditStream+" does not exist") {
		t.Errorf("no audit stream: %v", err)
	}
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := events.CheckStreams(ctx, js); err != nil {
		t.Errorf("after events.EnsureStreams: %v", err)
	}
}

func TestPublishDeduplicates(t *testing.T) {
	ctx, js := streamEnv(t)
	e, err := events.NewObjectEvent(testCluster, events.OpCreated, testBucket, testBucketData)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	first, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate {
		t.Fatal("the first publish was a duplicate")
	}
	second, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Duplicate || second.Sequence != first.Sequence {
		t.Errorf("second publish: %+v, want a duplicate of sequence %d", second, first.Sequence)
	}

	// The same change seen again later (a relist after a bridge restart) is a duplicate too.
	later, err := events.NewObjectEvent(testCluster, events.OpCreated, testBucket, testBucketData)
	if err != nil {
		t.Fatal(err)
	}
	if !later.Time().After(e.Time()) {
		t.Fatalf("the second event is not later: %s, %s", later.Time(), e.Time())
	}
	if ack, err := js.PublishMsg(ctx, mustEncode(t, later)); err != nil || !ack.Duplicate {
		t.Errorf("the same change seen later: %+v, %v; want a duplicate", ack, err)
	}
	// A new resourceVersion is a new event.
	changed := testBucket
	changed.ResourceVersion = "1008"
	next, err := events.NewObjectEvent(testCluster, events.OpUpdated, changed, testBucketData)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.PublishMsg(ctx, mustEncode(t, next)); err != nil || ack.Duplicate {
		t.Errorf("a new resourceVersion: %+v, %v; want a new message", ack, err)
	}
	info, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
	}
}

// purgeDue encodes the purge-due event of the named entry, due at dueAt.
func purgeDue(t *testing.T, name string, dueAt time.Time) (*nats.Msg, events.PurgeData) {
	t.Helper()
	entry := events.Ref{Kind: events.KindBackupEntry, Name: name, UID: testEntryUID, ResourceVersion: "48290", Generation: 3}
	data := events.PurgeData{Entry: name, UID: testEntryUID, BucketName: testBucket.Name, Prefix: name + "/", DueAt: dueAt.UTC()}
	e, err := events.NewPurgeEvent(testCluster, events.OpPurgeDue, entry, data, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return mustEncode(t, e), data
}

// schedule publishes msg on the entry's schedule subject, to fire on its own subject at fireAt.
func schedule(ctx context.Context, t *testing.T, js jetstream.JetStream, name string, msg *nats.Msg, fireAt time.Time) {
	t.Helper()
	target := msg.Subject
	if want, _ := events.Subject(events.TypePurgeDue, name); target != want {
		t.Fatalf("purge-due event on %q, want %q", target, want)
	}
	holder := *msg
	holder.Header = cloneHeader(msg.Header)
	opts := events.Schedule(&holder, events.PurgeScheduleSubject(name))
	ack, err := js.PublishMsg(ctx, &holder, append(opts, jetstream.WithScheduleAt(fireAt))...)
	if err != nil {
		t.Fatalf("scheduling: %v", err)
	}
	if ack.Duplicate {
		t.Fatalf("schedule %+v was a duplicate", ack)
	}
}

func TestScheduledPurgeFires(t *testing.T) {
	ctx, js := streamEnv(t)
	const name = "shoot--dev--sched.one"
	msg, data := purgeDue(t, name, testNow)
	target := msg.Subject
	schedule(ctx, t, js, name, msg, time.Now().Add(time.Second))

	cons, err := js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		t.Fatalf("the scheduled purge did not fire: %v", err)
	}
	if fired.Subject() != target {
		t.Errorf("fired on %q, want %q", fired.Subject(), target)
	}
	h := fired.Headers()
	for k, v := range msg.Header {
		if strings.HasPrefix(k, "ce-") || k == "content-type" {
			if !slices.Equal(h.Values(k), v) {
				t.Errorf("fired header %s = %q, want %q", k, h.Values(k), v)
			}
		}
	}
	// The scheduler names the schedule and drops the de-duplication id (the holder used it).
	if got := h.Get("Nats-Scheduler"); got != events.PurgeScheduleSubject(name) {
		t.Errorf("Nats-Scheduler = %q, want %q", got, events.PurgeScheduleSubject(name))
	}
	if got := h.Get("Nats-Schedule-Next"); got != "purge" {
		t.Errorf("Nats-Schedule-Next = %q, want purge (a one-shot schedule)", got)
	}
	for k := range h {
		if k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Schedule") && k != "Nats-Schedule-Next" && k != "Nats-Scheduler" {
			t.Errorf("fired message carries %s: %q", k, h.Values(k))
		}
	}
	e, err := events.Decode(h, fired.Data())
	if err != nil {
		t.Fatalf("the fired message does not decode: %v", err)
	}
	if e.ID() != msg.Header.Get("ce-id") || e.Type() != events.TypePurgeDue || e.Subject() != name {
		t.Errorf("fired event %s", e)
	}
	var got events.PurgeData
	if err := e.DataAs(&got); err != nil || !reflect.DeepEqual(got, data) {
		t.Errorf("fired data %+v, %v; want %+v", got, err, data)
	}

	// A one-shot schedule removes its holder once it fired.
	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := stream.GetLastMsgForSubject(ctx, events.PurgeScheduleSubject(name))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule holder is still there after firing: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRescheduleReplaces(t *testing.T) {
	ctx, js := streamEnv(t)
	const name = "shoot--dev--resched"
	now := time.Now()
	first, _ := purgeDue(t, name, testNow)
	second, secondData := purgeDue(t, name, testNow.Add(24*time.Hour))
	if first.Header.Get("ce-id") == second.Header.Get("ce-id") {
		t.Fatal("two due times share an event id")
	}
	target := first.Subject
	schedule(ctx, t, js, name, first, now.Add(2*time.Second))
	schedule(ctx, t, js, name, second, now.Add(3*time.Second))
	// The identical schedule again (same due time, same id): a duplicate, nothing changes.
	holder := *second
	holder.Subject, holder.Header = events.PurgeScheduleSubject(name), cloneHeader(second.Header)
	ack, err := js.PublishMsg(ctx, &holder, jetstream.WithScheduleAt(now.Add(3*time.Second)), jetstream.WithScheduleTarget(target))
	if err != nil || !ack.Duplicate {
		t.Errorf("re-publishing the same schedule: %+v, %v; want a duplicate", ack, err)
	}

	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.PurgeScheduleSubject(name)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[events.PurgeScheduleSubject(name)]; n != 1 {
		t.Errorf("%d schedule holders for one entry, want 1", n)
	}

	cons, err := js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		t.Fatalf("no purge fired: %v", err)
	}
	e, err := events.Decode(fired.Headers(), fired.Data())
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != second.Header.Get("ce-id") {
		t.Errorf("fired %s, want the second schedule %s", e.ID(), second.Header.Get("ce-id"))
	}
	var data events.PurgeData
	if err := e.DataAs(&data); err != nil || !data.DueAt.Equal(secondData.DueAt) {
		t.Errorf("fired data %+v, %v; want due at %s", data, err, secondData.DueAt)
	}
	// Well past both fire times: nothing else fires.
	if extra, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second)); err == nil {
		t.Errorf("a second purge fired: %s %q", extra.Subject(), extra.Headers().Get("ce-id"))
	} else if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Errorf("waiting for a second purge: %v", err)
	}
}

// Purging the schedule subject cancels a pending purge (the record stream allows purges). The
// proof is positive: a control schedule due a second after the cancelled one fires, and the
// cancelled one never came before it (scheduled messages fire in time order).
func TestCancelSchedule(t *testing.T) {
	ctx, js := streamEnv(t)
	const name, control = "shoot--dev--cancelled", "shoot--dev--control"
	msg, _ := purgeDue(t, name, testNow)
	controlMsg, _ := purgeDue(t, control, testNow.Add(time.Hour)) // another id: same uid, another due time
	now := time.Now()
	schedule(ctx, t, js, name, msg, now.Add(2*time.Second))
	schedule(ctx, t, js, control, controlMsg, now.Add(3*time.Second))

	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(events.PurgeScheduleSubject(name))); err != nil {
		t.Fatalf("purging the schedule subject: %v", err)
	}
	cons, err := js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{msg.Subject, controlMsg.Subject}})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		t.Fatalf("the control schedule did not fire: %v", err)
	}
	if fired.Subject() != controlMsg.Subject {
		t.Fatalf("a cancelled purge fired: %s %q", fired.Subject(), fired.Headers().Get("ce-id"))
	}
	extra, err := cons.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
	switch {
	case err == nil:
		t.Errorf("after the control, another purge fired: %s %q", extra.Subject(), extra.Headers().Get("ce-id"))
	case !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages):
		t.Errorf("looking for a purge after the control: %v", err)
	}
}
