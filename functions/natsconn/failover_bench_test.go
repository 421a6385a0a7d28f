package natsconn_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// failoverKills is how many times BenchmarkStreamLeaderFailover kills the stream's leader.
const failoverKills = 5

// BenchmarkStreamLeaderFailover kills the leader of an R3 stream on a cluster of three
// nats-server processes (SIGKILL) and publishes at once, failoverKills times: how long a
// housekeeper publish (natsconn.NewJetStream) waits until the new leader acknowledges it,
// beside nats.go's own publish (two retries 250 ms apart) in the same election. It prints a
// table; the built-in ns/op is suppressed.
func BenchmarkStreamLeaderFailover(b *testing.B) {
	env, nc, js := onCluster(b, zap.NewNop())
	plain, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stream := createR3(b, js, "FAILOVER")
	type row struct {
		leader         string
		waited         time.Duration
		unacknowledged string
		plainTook      time.Duration
		plainOutcome   string
	}
	var rows []row
	streamInfo := func() (*jetstream.StreamInfo, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return stream.Info(ctx)
	}
	for i := range failoverKills {
		info, err := streamInfo()
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			b.Fatalf("the stream's leader: %v", err)
		}
		node := env.NATSCluster.Node(info.Cluster.Leader)
		node.Kill()
		killed := time.Now()
		r := row{leader: info.Cluster.Leader}
		// nats.go's default request timeout: an answer lost with its leader waits that long.
		plainCtx, cancelPlain := context.WithTimeout(ctx, 5*time.Second)
		_, plainErr := plain.Publish(plainCtx, "failover.plain", nil)
		cancelPlain()
		r.plainTook, r.plainOutcome = time.Since(killed), "acknowledged"
		if plainErr != nil {
			r.plainOutcome = plainErr.Error()
		}
		msg := &nats.Msg{Subject: "failover.housekeeper", Header: nats.Header{nats.MsgIdHdr: []string{fmt.Sprintf("failover-%d", i)}}}
		// A stream left without a leader for a minute is what the row then says.
		pubCtx, cancelPub := context.WithTimeout(ctx, time.Minute)
		_, err = js.PublishMsg(pubCtx, msg)
		cancelPub()
		r.waited = time.Since(killed)
		if err != nil {
			r.unacknowledged = err.Error()
		}
		rows = append(rows, r)
		if err := node.Start(); err != nil {
			b.Fatal(err)
		}
		// Every node current again before the next kill.
		testenv.Eventually(b, time.Minute, "the stream's replicas current", func() (bool, string) {
			info, err := streamInfo()
			if err != nil || info.Cluster == nil {
				return false, fmt.Sprint(err)
			}
			current := 0
			for _, p := range info.Cluster.Replicas {
				if p.Current {
					current++
				}
			}
			return info.Cluster.Leader != "" && current == 2, fmt.Sprintf("leader %q, %d of 2 replicas current", info.Cluster.Leader, current)
		})
	}
	b.ReportMetric(0, "ns/op")
	var total time.Duration
	acked := 0
	for _, r := range rows {
		if r.unacknowledged == "" {
			total, acked = total+r.waited, acked+1
		}
	}
	if acked > 0 {
		b.ReportMetric((total / time.Duration(acked)).Seconds(), "s-to-ack/kill")
	}

	w := os.Stdout
	fmt.Fprintf(w, "\nStream leader killed (SIGKILL) on a cluster of 3 nats-server processes (R3), then one publish each way, %d times\n\n", failoverKills)
	fmt.Fprintln(w, "| kill | leader killed | housekeeper publish acknowledged after the kill (s) | nats.go publish alone: ended after (s) | its outcome |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---|")
	for i, r := range rows {
		waited := fmt.Sprintf("%.1f", r.waited.Seconds())
		if r.unacknowledged != "" {
			waited = fmt.Sprintf("not within %.0f: %s", r.waited.Seconds(), r.unacknowledged)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %.2f | %s |\n", i+1, r.leader, waited, r.plainTook.Seconds(), r.plainOutcome)
	}
	fmt.Fprintln(w)
}
