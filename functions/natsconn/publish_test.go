package natsconn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// A publish while the stream has no leader (its leader killed, the election under way) waits
// for the new leader and is stored once; the wait is logged once when it begins and once when it
// ends. nats.go alone gives up after two retries 250 ms apart.
func TestPublishWaitsOutALeaderElection(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	env, nc, js := onCluster(t, zap.New(core))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := createR3(t, js, "ELECTION")
	if _, err := js.Publish(ctx, "election.before", nil); err != nil {
		t.Fatal(err)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("an answered publish logged %d lines: %v", n, logs.All())
	}

	plain, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("the stream's leader: %v %+v", err, info)
	}
	env.NATSCluster.Node(info.Cluster.Leader).Kill()
	t.Logf("killed %s, the stream's leader", info.Cluster.Leader)

	// nats.go alone, in the same election: no stream answers, or the answer is lost with the
	// leader (then it waits for its 5 s default timeout).
	plainErr := make(chan error, 1)
	go func() {
		plainCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := plain.Publish(plainCtx, "election.plain", nil)
		plainErr <- err
	}()
	start := time.Now()
	msg := &nats.Msg{Subject: "election.during", Header: nats.Header{nats.MsgIdHdr: []string{"election-1"}}}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatalf("publish during the election: %v", err)
	}
	if err := <-plainErr; !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a plain publish during the election: %v, want %v or a time-out (the election was over before it)", err, jetstream.ErrNoStreamResponse)
	}
	t.Logf("the publish waited %s for the new leader", time.Since(start).Round(time.Millisecond))
	// The same message again is the duplicate JetStream drops.
	if ack, err := js.PublishMsg(ctx, msg); err != nil || !ack.Duplicate {
		t.Fatalf("the message again: %+v, %v; want a duplicate", ack, err)
	}

	var got []string
	for _, e := range logs.All() {
		got = append(got, fmt.Sprintf("%s %s", e.Level, e.Message))
	}
	want := []string{
		"warn JetStream does not acknowledge publishes (a leader election?); they wait and are retried with their message ids",
		"info JetStream acknowledges publishes again",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	if waited := logs.All()[1].ContextMap()["waited"]; waited == nil {
		t.Errorf("the end of the wait does not say how long it was: %v", logs.All()[1].ContextMap())
	}
	last, err := stream.GetLastMsgForSubject(ctx, "election.during")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("the stream holds %+v (%v), want 2 messages: before and during (stored once, at %d)", info.State, err, last.Sequence)
	}
}

// onCluster starts a cluster of three nats-server processes and connects to it, through
// restarts, with natsconn.NewJetStream logging to log.
func onCluster(t testing.TB, log *zap.Logger) (*testenv.Env, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	env := testenv.Start(t, testenv.WithNATSCluster(3))
	nc, err := nats.Connect(env.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsconn.NewJetStream(nc, log)
	if err != nil {
		t.Fatal(err)
	}
	return env, nc, js
}

// createR3 creates an R3 stream of subjects <lowercase name>.>. A request the cluster loses
// (one sent while a meta leader is elected gets no answer) is sent again.
func createR3(t testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	var stream jetstream.Stream
	testenv.Eventually(t, time.Minute, "stream "+name+" created", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Replicas: 3})
		return err == nil, fmt.Sprint(err)
	})
	return stream
}

// A publish that no stream answers, with the server gone for good, ends with the caller's
// context, with the publish's error.
func TestPublishWaitsNoLongerThanItsContext(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	nc, err := nats.Connect(env.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsconn.NewJetStream(nc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = js.Publish(ctx, "nowhere.subject", nil) // no stream takes it
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish with no stream: %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
	if took := time.Since(start); took < 1500*time.Millisecond || took > 4*time.Second {
		t.Fatalf("the publish gave up after %s, want about its context's 2 s", took)
	}
}
