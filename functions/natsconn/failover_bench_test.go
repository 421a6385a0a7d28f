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

	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
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
	env := testenv.Start(b, testenv.WithNATSCluster(3))
	nc, err := nats.Connect(env.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := natsconn.NewJetStream(nc, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	plain, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FAILOVER", Subjects: []string{"failover.>"}, Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	type row struct {
		leader       string
		waited       time.Duration
		plainTook    time.Duration
		plainOutcome string
	}
	var rows []row
	for i := range failoverKills {
		info, err := stream.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			b.Fatalf("the stream's leader: %v", err)
		}
		node := env.NATSCluster.Node(info.Cluster.Leader)
		node.Kill()
		killed := time.Now()
		r := row{leader: info.Cluster.Leader}
		_, plainErr := plain.Publish(ctx, "failover.plain", nil)
		r.plainTook, r.plainOutcome = time.Since(killed), "acknowledged"
		if plainErr != nil {
			r.plainOutcome = plainErr.Error()
		}
		msg := &nats.Msg{Subject: "failover.housekeeper", Header: nats.Header{nats.MsgIdHdr: []string{fmt.Sprintf("failover-%d", i)}}}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			b.Fatalf("kill %d: the publish: %v", i+1, err)
		}
		r.waited = time.Since(killed)
		rows = append(rows, r)
		if err := node.Start(); err != nil {
			b.Fatal(err)
		}
		// Every node current again before the next kill.
		testenv.Eventually(b, time.Minute, "the stream's replicas current", func() (bool, string) {
			info, err := stream.Info(ctx)
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
	for _, r := range rows {
		total += r.waited
	}
	b.ReportMetric((total / time.Duration(len(rows))).Seconds(), "s-to-ack/kill")

	w := os.Stdout
	fmt.Fprintf(w, "\nStream leader killed (SIGKILL) on a cluster of 3 nats-server processes (R3), then one publish each way, %d times\n\n", failoverKills)
	fmt.Fprintln(w, "| kill | leader killed | housekeeper publish acknowledged after the kill (s) | nats.go publish alone: ended after (s) | its outcome |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---|")
	for i, r := range rows {
		fmt.Fprintf(w, "| %d | %s | %.1f | %.2f | %s |\n", i+1, r.leader, r.waited.Seconds(), r.plainTook.Seconds(), r.plainOutcome)
	}
	fmt.Fprintln(w)
}
