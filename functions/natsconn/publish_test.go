package natsconn_test

import (
	"context"
	"errors"
	"fmt"
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
	env := testenv.Start(t, testenv.WithNATSCluster(3))
	nc, err := nats.Connect(env.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	core, logs := observer.New(zap.InfoLevel)
	js, err := natsconn.NewJetStream(nc, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ELECTION", Subjects: []string{"election.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
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

	// nats.go alone, during the election: no stream answers.
	_, plainErr := plain.Publish(ctx, "election.plain", nil)
	if !errors.Is(plainErr, jetstream.ErrNoStreamResponse) {
		t.Fatalf("a plain publish during the election: %v, want %v (the election was over before it)", plainErr, jetstream.ErrNoStreamResponse)
	}
	start := time.Now()
	msg := &nats.Msg{Subject: "election.during", Header: nats.Header{nats.MsgIdHdr: []string{"election-1"}}}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatalf("publish during the election: %v", err)
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
