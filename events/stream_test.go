package events

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

func TestStreamConfigs(t *testing.T) {
	record, dl := StreamConfigs()
	if record.Name != "HOUSEKEEPER" || !slices.Equal(record.Subjects, []string{"housekeeper.>"}) ||
		record.Retention != jetstream.LimitsPolicy || record.MaxAge != 14*24*time.Hour ||
		record.Duplicates != 10*time.Minute || !record.AllowMsgSchedules || !record.AllowMsgTTL ||
		record.DenyPurge || record.Storage != jetstream.FileStorage || record.Replicas != 1 {
		t.Errorf("record stream %+v", record)
	}
	if dl.Name != "HOUSEKEEPER_DEADLETTER" || !slices.Equal(dl.Subjects, []string{"housekeeper-deadletter.>"}) ||
		dl.Retention != jetstream.LimitsPolicy || dl.MaxAge != 30*24*time.Hour || dl.Storage != jetstream.FileStorage ||
		dl.Duplicates != 10*time.Minute { // as events/README.md says

		t.Errorf("dead-letter stream %+v", dl)
	}

	record, dl = StreamConfigs(WithMaxAge(2*time.Minute), WithDeadLetterMaxAge(time.Hour), WithReplicas(3), WithMemoryStorage())
	if record.MaxAge != 2*time.Minute || dl.MaxAge != time.Hour || record.Replicas != 3 || dl.Replicas != 3 ||
		record.Storage != jetstream.MemoryStorage || dl.Storage != jetstream.MemoryStorage {
		t.Errorf("options not applied: %+v, %+v", record, dl)
	}
	// JetStream refuses a duplicate window longer than the max age.
	if record.Duplicates != 2*time.Minute {
		t.Errorf("duplicate window %s with max age 2m, want 2m", record.Duplicates)
	}
	if _, dl = StreamConfigs(WithDeadLetterMaxAge(time.Minute)); dl.Duplicates != time.Minute {
		t.Errorf("dead-letter duplicate window %s with max age 1m, want 1m", dl.Duplicates)
	}
}

// streamEnv is a real nats-server with JetStream and the housekeeper streams.
func streamEnv(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	return ctx, js
}

func TestEnsureStreams(t *testing.T) {
	ctx, js := streamEnv(t)
	record, err := js.Stream(ctx, RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	info := record.CachedInfo()
	cfg := info.Config
	if cfg.Retention != jetstream.LimitsPolicy || !cfg.AllowMsgSchedules || !cfg.AllowMsgTTL ||
		cfg.Duplicates != 10*time.Minute || cfg.MaxAge != DefaultMaxAge || !slices.Equal(cfg.Subjects, []string{SubjectAll}) {
		t.Errorf("record stream as the server has it: %+v", cfg)
	}
	dl, err := js.Stream(ctx, DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := dl.CachedInfo().Config; c.Retention != jetstream.LimitsPolicy || c.MaxAge != DefaultDeadLetterMaxAge {
		t.Errorf("dead-letter stream as the server has it: %+v", c)
	}

	// Events and dead letters go to their own streams.
	msg := encoded(t)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil || ack.Stream != RecordStream {
		t.Fatalf("publishing an event: %+v, %v", ack, err)
	}
	if ack, err := js.Publish(ctx, DeadLetterSubject("purge"), []byte("x")); err != nil || ack.Stream != DeadLetterStream {
		t.Fatalf("publishing a dead letter: %+v, %v", ack, err)
	}

	// Again, from another process: no error, same streams, messages kept, and no update at
	// all (the server announces every update).
	updates, err := js.Conn().SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureStreams(ctx, js); err != nil {
		t.Fatalf("second EnsureStreams: %v", err)
	}
	if m, err := updates.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("second EnsureStreams updated an unchanged stream: %s", m.Subject)
	}
	again, err := record.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Created.Equal(info.Created) || again.State.Msgs != 1 {
		t.Errorf("second EnsureStreams recreated or emptied the stream: created %s → %s, %d messages",
			info.Created, again.Created, again.State.Msgs)
	}
	if again.Config.Duplicates != cfg.Duplicates || again.Config.MaxAge != cfg.MaxAge || !again.Config.AllowMsgSchedules {
		t.Errorf("second EnsureStreams changed the configuration: %+v", again.Config)
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
	if !slices.Equal(names, []string{RecordStream, DeadLetterStream}) {
		t.Errorf("streams %v", names)
	}

	// A changed option updates the stream in place.
	if err := EnsureStreams(ctx, js, WithMaxAge(48*time.Hour)); err != nil {
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

// CheckStreams names the stream that is missing and points at the setup; once the setup ran, it
// is content.
func TestCheckStreams(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := CheckStreams(ctx, js)
	if !errors.Is(err, ErrNotSetUp) || !strings.Contains(err.Error(), "stream "+RecordStream+" does not exist") ||
		!strings.Contains(err.Error(), "housekeeper setup") {
		t.Errorf("no streams: %v", err)
	}
	record, _ := StreamConfigs()
	if _, err := js.CreateStream(ctx, record); err != nil {
		t.Fatal(err)
	}
	if err := CheckStreams(ctx, js); !errors.Is(err, ErrNotSetUp) || !strings.Contains(err.Error(), "stream "+DeadLetterStream+" does not exist") {
		t.Errorf("no dead-letter stream: %v", err)
	}
	if err := EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := CheckStreams(ctx, js); err != nil {
		t.Errorf("after EnsureStreams: %v", err)
	}
}

func TestPublishDeduplicates(t *testing.T) {
	ctx, js := streamEnv(t)
	e, err := NewObjectEvent(testCluster, KindBackupBucket, OpCreated, testBucketObj(), at(testNow))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := Encode(e)
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
	later, err := NewObjectEvent(testCluster, KindBackupBucket, OpCreated, testBucketObj(), at(testNow.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.PublishMsg(ctx, mustEncode(t, later)); err != nil || !ack.Duplicate {
		t.Errorf("the same change seen later: %+v, %v; want a duplicate", ack, err)
	}
	// A new resourceVersion is a new event.
	changed := testBucketObj()
	changed.ResourceVersion = "1008"
	next, err := NewObjectEvent(testCluster, KindBackupBucket, OpUpdated, changed, at(testNow))
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.PublishMsg(ctx, mustEncode(t, next)); err != nil || ack.Duplicate {
		t.Errorf("a new resourceVersion: %+v, %v; want a new message", ack, err)
	}
	info, err := js.Stream(ctx, RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
	}
}

// purgeDue encodes the purge-due event of the named entry, due at dueAt.
func purgeDue(t *testing.T, name string, dueAt time.Time) (*nats.Msg, PurgeData) {
	t.Helper()
	entry := testEntry()
	entry.Name = name
	data := PurgeData{Entry: name, UID: testEntryUID, BucketName: testBucket, Prefix: name + "/", DueAt: dueAt.UTC()}
	e, err := NewPurgeEvent(testCluster, OpPurgeDue, entry, data, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return mustEncode(t, e), data
}

// schedule publishes msg on the entry's schedule subject, to fire on its own subject at fireAt.
func schedule(ctx context.Context, t *testing.T, js jetstream.JetStream, name string, msg *nats.Msg, fireAt time.Time) {
	t.Helper()
	target := msg.Subject
	if want, _ := Subject(TypePurgeDue, name); target != want {
		t.Fatalf("purge-due event on %q, want %q", target, want)
	}
	holder := *msg
	holder.Subject = PurgeScheduleSubject(name)
	holder.Header = cloneHeader(msg.Header)
	ack, err := js.PublishMsg(ctx, &holder, jetstream.WithScheduleAt(fireAt), jetstream.WithScheduleTarget(target))
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

	cons, err := js.OrderedConsumer(ctx, RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{target}})
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
	if got := h.Get("Nats-Scheduler"); got != PurgeScheduleSubject(name) {
		t.Errorf("Nats-Scheduler = %q, want %q", got, PurgeScheduleSubject(name))
	}
	if got := h.Get("Nats-Schedule-Next"); got != "purge" {
		t.Errorf("Nats-Schedule-Next = %q, want purge (a one-shot schedule)", got)
	}
	for k := range h {
		if k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Schedule") && k != "Nats-Schedule-Next" && k != "Nats-Scheduler" {
			t.Errorf("fired message carries %s: %q", k, h.Values(k))
		}
	}
	e, err := Decode(h, fired.Data())
	if err != nil {
		t.Fatalf("the fired message does not decode: %v", err)
	}
	if e.ID() != msg.Header.Get("ce-id") || e.Type() != TypePurgeDue || e.Subject() != name {
		t.Errorf("fired event %s", e)
	}
	var got PurgeData
	if err := e.DataAs(&got); err != nil || got != data {
		t.Errorf("fired data %+v, %v; want %+v", got, err, data)
	}

	// A one-shot schedule removes its holder once it fired.
	stream, err := js.Stream(ctx, RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := stream.GetLastMsgForSubject(ctx, PurgeScheduleSubject(name))
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
	holder.Subject, holder.Header = PurgeScheduleSubject(name), cloneHeader(second.Header)
	ack, err := js.PublishMsg(ctx, &holder, jetstream.WithScheduleAt(now.Add(3*time.Second)), jetstream.WithScheduleTarget(target))
	if err != nil || !ack.Duplicate {
		t.Errorf("re-publishing the same schedule: %+v, %v; want a duplicate", ack, err)
	}

	stream, err := js.Stream(ctx, RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(PurgeScheduleSubject(name)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[PurgeScheduleSubject(name)]; n != 1 {
		t.Errorf("%d schedule holders for one entry, want 1", n)
	}

	cons, err := js.OrderedConsumer(ctx, RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{target}})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		t.Fatalf("no purge fired: %v", err)
	}
	e, err := Decode(fired.Headers(), fired.Data())
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != second.Header.Get("ce-id") {
		t.Errorf("fired %s, want the second schedule %s", e.ID(), second.Header.Get("ce-id"))
	}
	var data PurgeData
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

	stream, err := js.Stream(ctx, RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(PurgeScheduleSubject(name))); err != nil {
		t.Fatalf("purging the schedule subject: %v", err)
	}
	cons, err := js.OrderedConsumer(ctx, RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{msg.Subject, controlMsg.Subject}})
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
