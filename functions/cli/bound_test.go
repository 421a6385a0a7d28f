package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// The --timeout the tests give, and how long past it a command may take to return (connecting,
// giveUpGrace, a loaded machine). A command that hangs is failed after hangLimit.
const (
	testTimeout = 2 * time.Second
	slack       = 4 * time.Second
	hangLimit   = 45 * time.Second
)

// silence stops the test's nats-server in the middle of a command, right before its
// beforePublish-th publish or its first Fetch: from then on nothing answers and the client's
// requests wait, as they do while a stream has no leader or a cluster no quorum.
type silence struct {
	stopServer    func()
	beforePublish int32 // 0: never
	beforeFetch   bool

	once      sync.Once
	publishes atomic.Int32
}

func (s *silence) now() { s.once.Do(s.stopServer) }

// connector connects as the command line does, with the silence wrapped around its JetStream.
func (s *silence) connector(url string) connector {
	connect := natsConnector(natsconn.Options{URL: url})
	return func(identity string) (*nats.Conn, jetstream.JetStream, error) {
		nc, js, err := connect(identity)
		if err != nil {
			return nil, nil, err
		}
		return nc, silencedJetStream{JetStream: js, s: s}, nil
	}
}

type silencedJetStream struct {
	jetstream.JetStream
	s *silence
}

func (j silencedJetStream) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if j.s.publishes.Add(1) == j.s.beforePublish {
		j.s.now()
	}
	return j.JetStream.PublishMsg(ctx, msg, opts...)
}

func (j silencedJetStream) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := j.JetStream.OrderedConsumer(ctx, stream, cfg)
	if err != nil || !j.s.beforeFetch {
		return c, err
	}
	return silencedConsumer{Consumer: c, s: j.s}, nil
}

type silencedConsumer struct {
	jetstream.Consumer
	s *silence
}

func (c silencedConsumer) Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	c.s.now()
	return c.Consumer.Fetch(batch, opts...)
}

// bounded runs a command, failing the test if it takes longer than testTimeout and slack.
func bounded(t *testing.T, command func(out *bytes.Buffer) error) (string, error) {
	t.Helper()
	var out bytes.Buffer
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- command(&out) }()
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("after %s: %v\n%s", took.Round(time.Millisecond), err, &out)
		if took > testTimeout+slack {
			t.Errorf("the command took %s with --timeout %s", took.Round(time.Millisecond), testTimeout)
		}
		return out.String(), err
	case <-time.After(hangLimit):
		t.Fatalf("the command hangs: no return %s after JetStream went silent (--timeout %s)", hangLimit, testTimeout)
		return "", nil
	}
}

// deadLetter puts a dead letter of function alpha for an event about name on the dead-letter
// stream, as a worker that gave up does.
func (f *fixture) deadLetter(name string) uint64 {
	e, err := events.NewObjectEvent("test", events.OpCreated, events.Ref{Kind: events.KindBackupBucket, Name: name, UID: "uid-" + name, ResourceVersion: "1"}, []byte(`{}`))
	if err != nil {
		f.t.Fatal(err)
	}
	msg, _ := events.Encode(e)
	msg.Header.Set(events.HeaderSubject, msg.Subject)
	msg.Subject = events.DeadLetterSubject("alpha")
	msg.Header.Del(nats.MsgIdHdr)
	msg.Header.Set(events.HeaderFunction, "alpha")
	msg.Header.Set(events.HeaderReason, "broken "+name)
	msg.Header.Set(events.HeaderFailedAt, time.Now().UTC().Format(time.RFC3339Nano))
	ack, err := f.js.PublishMsg(context.Background(), msg)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// restart starts the stopped server again and waits until the fixture's connection is back.
func (f *fixture) restart() {
	f.t.Helper()
	if err := f.server.Start(); err != nil {
		f.t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); !f.nc.IsConnected(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatal("the fixture's connection did not come back")
		}
	}
}

// noAnswer checks err is the bound's, naming what the command waited for.
func noAnswer(t *testing.T, err error, what string) {
	t.Helper()
	want := fmt.Sprintf("%s: no answer within %s (a JetStream leader election?)", what, testTimeout)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("error %v, want ErrNoAnswer saying %q", err, want)
	}
}

// A list whose JetStream goes silent between creating its ordered consumer and fetching from it
// (where nats.go re-creates the consumer, forever, with no context to stop it) ends within
// --timeout, saying what it read.
func TestDeadLettersListGivesUpWhenJetStreamGoesSilent(t *testing.T) {
	f := newFixture(t)
	f.deadLetter("b1")
	if code, out, errOut := f.cli("deadletters", "list"); code != 0 || !strings.Contains(out, "1 dead letters") {
		t.Fatalf("list: exit %d, err %q:\n%s", code, errOut, out)
	}
	s := &silence{stopServer: f.server.Stop, beforeFetch: true}
	_, err := bounded(t, func(out *bytes.Buffer) error {
		return deadLettersList(context.Background(), []string{"--timeout", testTimeout.String()}, out, s.connector(f.url))
	})
	noAnswer(t, err, "reading dead letters from stream "+events.DeadLetterStream)
}

// A replay whose JetStream goes silent half way ends within --timeout, says how far it got and
// how to resume; resumed so, every event of the window was re-driven.
func TestReplayGivesUpWhenJetStreamGoesSilentAndResumes(t *testing.T) {
	f := newFixture(t)
	fn := runner.Function{Name: "alpha", Types: []string{events.TypeBucketCreated}}
	if _, err := runner.EnsureConsumer(context.Background(), f.js, fn, runner.DefaultConsumerSettings()); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := range 6 {
		seqs = append(seqs, f.publish(fmt.Sprintf("b%d", i)))
	}
	from, until := fmt.Sprint(seqs[0]), fmt.Sprint(seqs[5])

	s := &silence{stopServer: f.server.Stop, beforePublish: 3}
	out, err := bounded(t, func(out *bytes.Buffer) error {
		return replay(context.Background(), []string{"--function", "alpha", "--from-seq", from, "--until-seq", until, "--timeout", testTimeout.String()}, out, s.connector(f.url))
	})
	noAnswer(t, err, "re-driving events of stream "+events.RecordStream)
	if want := fmt.Sprintf("re-drove 2 events, up to sequence %d", seqs[1]); !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("error %v does not say how far the replay got: %q", err, want)
	}
	resume := regexp.MustCompile(`to resume: housekeeper replay (.*)`).FindStringSubmatch(out)
	if want := fmt.Sprintf("--function alpha --from-seq %d --until-seq %s", seqs[2], until); resume == nil || resume[1] != want {
		t.Fatalf("the replay does not say to resume with %q:\n%s", want, out)
	}

	f.restart()
	code, out, errOut := f.cli(append([]string{"replay"}, strings.Fields(resume[1])...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("re-drove 4 events (sequences %d..%d)", seqs[2], seqs[5])) {
		t.Fatalf("resumed replay: exit %d, err %q:\n%s", code, errOut, out)
	}
	if missing := notRedriven(t, f.js, seqs); len(missing) > 0 {
		t.Errorf("events never re-driven to alpha: sequences %v", missing)
	}
}

// notRedriven returns the sequences among seqs whose event is not on alpha's redrive subject.
func notRedriven(t *testing.T, js jetstream.JetStream, seqs []uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	redriven := map[string]bool{}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.RedriveSubject("alpha")}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		redriven[msg.Headers().Get("ce-id")] = true
	}
	var missing []uint64
	for _, seq := range seqs {
		raw, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if !redriven[raw.Header.Get("ce-id")] {
			missing = append(missing, seq)
		}
	}
	return missing
}

// A retry whose JetStream goes silent half way ends within --timeout; it says which dead letters
// it re-drove and which it did not try, and those stay dead letters.
func TestDeadLettersRetryGivesUpWhenJetStreamGoesSilent(t *testing.T) {
	f := newFixture(t)
	d1, d2, d3 := f.deadLetter("b1"), f.deadLetter("b2"), f.deadLetter("b3")
	s := &silence{stopServer: f.server.Stop, beforePublish: 2}
	out, err := bounded(t, func(out *bytes.Buffer) error {
		return deadLettersRetry(context.Background(), []string{"--all", "--timeout", testTimeout.String()}, out, s.connector(f.url))
	})
	noAnswer(t, err, fmt.Sprintf("dead letter %d of stream %s", d2, events.DeadLetterStream))
	for _, want := range []string{fmt.Sprintf("retried %d:", d1), fmt.Sprintf("not tried, left as they were: --seq %d\n", d3), "1 dead letters re-driven, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("retry does not say %q:\n%s", want, out)
		}
	}

	f.restart()
	code, out, errOut := f.cli("deadletters", "list")
	if code != 0 || !strings.Contains(out, "2 dead letters") || !strings.Contains(out, "broken b2") || !strings.Contains(out, "broken b3") {
		t.Errorf("after the stopped retry, want b2's and b3's dead letters: exit %d, err %q:\n%s", code, errOut, out)
	}
}

// watch gives up on work that never returns, and not on work that keeps saying it is alive.
func TestWatchBoundsSilenceNotWork(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	start := time.Now()
	err := watch(context.Background(), 200*time.Millisecond, "waiting", func(ctx context.Context, _ func()) error {
		<-stuck // as an ordered consumer's Fetch: no context
		return nil
	})
	if took := time.Since(start); !errors.Is(err, ErrNoAnswer) || took > 200*time.Millisecond+giveUpGrace+time.Second {
		t.Errorf("stuck work: %v after %s", err, took)
	}
	if err == nil || err.Error() != "waiting: no answer within 200ms (a JetStream leader election?)" {
		t.Errorf("stuck work: %v", err)
	}

	err = watch(context.Background(), 200*time.Millisecond, "working", func(ctx context.Context, alive func()) error {
		for range 8 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			alive()
			if d, ok := ctx.Deadline(); !ok || time.Until(d) < 150*time.Millisecond {
				return fmt.Errorf("deadline %v, %v: not moved by alive", d, ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("work that stays alive for 4 timeouts: %v", err)
	}

	err = watch(context.Background(), time.Second, "failing", func(context.Context, func()) error { return errSkip })
	if err != errSkip {
		t.Errorf("work's own error: %v, want it as it is", err)
	}
}
