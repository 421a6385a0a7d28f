package contract

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// maxAge is how long the streams of these tests keep a message.
const maxAge = 2 * time.Second

// streamEnvWithMaxAge is streamEnv with a stream of record that keeps messages for maxAge.
func streamEnvWithMaxAge(t *testing.T, maxAge time.Duration) (context.Context, jetstream.JetStream) {
	t.Helper()
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := events.EnsureStreams(ctx, js, events.WithMaxAge(maxAge)); err != nil {
		t.Fatal(err)
	}
	return ctx, js
}

// A schedule due long after the stream's max age fires, on time: its holder is exempt from
// the max age (events.TTLNever). The control is the same schedule without that TTL, which the
// max age removes before it fires (what every purge suffered before).
func TestScheduleOutlivesTheStreamsMaxAge(t *testing.T) {
	ctx, js := streamEnvWithMaxAge(t, maxAge)
	due := time.Now().Add(5 * maxAge).Truncate(time.Second) // the scheduler's "@at" has whole seconds
	kept, _ := purgeDue(t, "shoot--dev--kept", due)
	schedule(ctx, t, js, "shoot--dev--kept", kept, due)
	aged, _ := purgeDue(t, "shoot--dev--aged", due)
	holder := *aged
	holder.Header = cloneHeader(aged.Header)
	opts := events.Schedule(&holder, events.PurgeScheduleSubject("shoot--dev--aged"))
	holder.Header.Del(jetstream.MsgTTLHeader) // the control: a holder as a plain message
	if _, err := js.PublishMsg(ctx, &holder, append(opts, jetstream.WithScheduleAt(due))...); err != nil {
		t.Fatal(err)
	}

	cons, err := js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{kept.Subject, aged.Subject}})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := cons.Next(jetstream.FetchMaxWait(time.Until(due) + 10*time.Second))
	if err != nil {
		t.Fatalf("no schedule fired by %s after its due time, with a max age of %s: %v", 10*time.Second, maxAge, err)
	}
	if fired.Subject() != kept.Subject {
		t.Fatalf("fired %s, want %s", fired.Subject(), kept.Subject)
	}
	meta, err := fired.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if late := meta.Timestamp.Sub(due); late < 0 || late > 2*time.Second {
		t.Errorf("fired at %s, %s from its due time %s", meta.Timestamp, late, due)
	}
	// The copy it fires is an event like the others: it ages out, it is not kept forever.
	if ttl := fired.Headers().Get(jetstream.MsgTTLHeader); ttl == events.TTLNever {
		t.Errorf("the fired copy carries Nats-TTL %q", ttl)
	}
	if again, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second)); err == nil {
		t.Errorf("the control fired too (%s): the max age did not remove a holder without the TTL, so this test shows nothing", again.Subject())
	} else if !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("waiting for the control: %v", err)
	}
}

// A stream of record whose settings would remove a pending schedule is refused, by setup and
// by every process at start-up, naming the setting and why; what setup manages (max age) it
// sets, what it does not (limits set by hand) it leaves to the operator.
func TestUnsafeStreamSettingsAreRefused(t *testing.T) {
	ctx, js := streamEnv(t)
	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxBytes = 1 << 30
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{"setup": events.EnsureStreams(ctx, js), "start-up": events.CheckStreams(ctx, js)} {
		if !errors.Is(err, events.ErrScheduleUnsafe) || !strings.Contains(err.Error(), "max bytes 1073741824") || !strings.Contains(err.Error(), "pending schedules") {
			t.Errorf("%s with max bytes set: %v", what, err)
		}
	}
	cfg.MaxBytes = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureStreams(ctx, js, events.WithMaxAge(time.Hour)); err != nil {
		t.Errorf("setup after the limit was lifted: %v", err)
	}
	if err := events.CheckStreams(ctx, js); err != nil {
		t.Errorf("start-up after the limit was lifted: %v", err)
	}
}

// A repeating schedule (a cron backup's, here every second) is one holder that fires again and again: it too
// outlives the max age, where the control, without the TTL, stops firing once it aged out.
func TestRepeatingScheduleOutlivesTheStreamsMaxAge(t *testing.T) {
	ctx, js := streamEnvWithMaxAge(t, maxAge)
	every := func(name string, keep bool) string {
		msg, _ := purgeDue(t, name, testNow)
		opts := events.Schedule(msg, events.PurgeScheduleSubject(name))
		if !keep {
			msg.Header.Del(jetstream.MsgTTLHeader)
		}
		if _, err := js.PublishMsg(ctx, msg, append(opts, jetstream.WithScheduleCron("* * * * * *"))...); err != nil {
			t.Fatal(err)
		}
		target, _ := events.Subject(events.TypePurgeDue, name)
		return target
	}
	kept, aged := every("shoot--dev--every", true), every("shoot--dev--every-aged", false)
	time.Sleep(4 * maxAge)
	since := time.Now()
	cons, err := js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{kept, aged}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
	if err != nil {
		t.Fatal(err)
	}
	fired := map[string]int{}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Until(end) + 100*time.Millisecond))
		if err != nil {
			break
		}
		fired[m.Subject()]++
	}
	if fired[kept] < 2 {
		t.Errorf("the kept schedule fired %d times in 3 s, %s after it was installed with a max age of %s", fired[kept], 4*maxAge, maxAge)
	}
	if fired[aged] != 0 {
		t.Errorf("the control fired %d times after its holder should have aged out: this test shows nothing", fired[aged])
	}
}
