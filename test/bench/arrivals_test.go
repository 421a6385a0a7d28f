package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// arrivalRate is BenchmarkCost's pace: the events of a 5,000-entry burst reach NATS at about
// the rate the entries converge.
const arrivalRate = 120

// BenchmarkArrivals measures what a stream replicated on three nats-servers (R3, syncing at
// their default, as infra/nats runs them) costs the servers per arrival rather than per
// message: 5,000 events of 1.5 KB published at 120 a second one at a time, in groups of three
// (the bridge's pacer at that pace), of twelve, and all at once, and one at a time to a stream of
// one replica on the same servers (the audit stream's default); then published in groups of
// three and consumed by 16 workers that each take 100 ms per event, as housekeeper's functions
// consume (a fetch per free slot, an acknowledgement confirmed by the server), beside one
// long-lived pull for all 16. It prints the servers' CPU for each, from /proc.
func BenchmarkArrivals(b *testing.B) {
	const n = 5000
	c, err := stack.StartNATSCluster(b.TempDir(), 3, "", func(string) io.Writer { return io.Discard }, stack.NATSDefaultSync())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	nc, err := nats.Connect(c.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ARRIVALS", Subjects: []string{"arrivals.>"},
		Replicas: 3, Duplicates: 10 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ARRIVALS_R1", Subjects: []string{"arrivals-r1.>"},
		Replicas: 1, Duplicates: 10 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	cpu := func() float64 {
		sum := 0.0
		for _, node := range c.Nodes {
			u, err := usageOf(node.Pid())
			if err != nil {
				b.Fatal(err)
			}
			sum += u.cpu.Seconds()
		}
		return sum
	}
	payload := make([]byte, 1500)
	publish := func(root, run string, group int) {
		pace := time.NewTicker(time.Duration(group) * time.Second / arrivalRate)
		defer pace.Stop()
		for i := 0; i < n; i += group {
			if group < n {
				<-pace.C
			}
			for j := i; j < min(i+group, n); j++ {
				m := nats.NewMsg(fmt.Sprintf("%s.%s.%d", root, run, j))
				m.Data = payload
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", run, j))
				if _, err := js.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatalf("%s: no acks within a minute", run)
		}
	}
	type measured struct {
		label string
		cpu   float64
		took  time.Duration
	}
	var rows []measured
	measure := func(label string, f func()) {
		before, start := cpu(), time.Now()
		f()
		rows = append(rows, measured{label, cpu() - before, time.Since(start)})
		logf("arrivals: %s: %.2f s of CPU", label, rows[len(rows)-1].cpu)
	}

	for _, group := range []int{1, 3, 12, n} {
		label := fmt.Sprintf("published in groups of %d", group)
		switch group {
		case 1:
			label = "published one at a time"
		case n:
			label = "published all at once"
		}
		measure(label, func() { publish("arrivals", "p"+strconv.Itoa(group), group) })
	}
	measure("published one at a time to a stream of one replica", func() { publish("arrivals-r1", "p1", 1) })

	consumers := []struct {
		label   string
		consume func(cons jetstream.Consumer, handle func(jetstream.Msg)) (stop func())
	}{
		{"consumed by 16 workers, a fetch per free slot, confirmed acks", func(cons jetstream.Consumer, handle func(jetstream.Msg)) func() {
			stopped := make(chan struct{})
			var workers sync.WaitGroup
			for range 16 {
				workers.Go(func() {
					for {
						select {
						case <-stopped:
							return
						default:
						}
						fetchCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
						batch, err := cons.Fetch(1, jetstream.FetchContext(fetchCtx))
						if err == nil {
							for msg := range batch.Messages() {
								handle(msg)
							}
						}
						cancel()
					}
				})
			}
			return func() { close(stopped); workers.Wait() }
		}},
		{"consumed by one long-lived pull for 16 handlers, confirmed acks", func(cons jetstream.Consumer, handle func(jetstream.Msg)) func() {
			slots := make(chan struct{}, 16)
			var running sync.WaitGroup
			cc, err := cons.Consume(func(msg jetstream.Msg) {
				slots <- struct{}{}
				running.Go(func() { defer func() { <-slots }(); handle(msg) })
			}, jetstream.PullMaxMessages(16))
			if err != nil {
				b.Fatal(err)
			}
			return func() { cc.Stop(); running.Wait() }
		}},
	}
	for i, consumer := range consumers {
		run := "c" + strconv.Itoa(i)
		cons, err := js.CreateOrUpdateConsumer(ctx, "ARRIVALS", jetstream.ConsumerConfig{Durable: run, FilterSubject: "arrivals." + run + ".>",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 256})
		if err != nil {
			b.Fatal(err)
		}
		var handled atomic.Int64
		measure("published in groups of 3, "+consumer.label, func() {
			stop := consumer.consume(cons, func(msg jetstream.Msg) {
				time.Sleep(100 * time.Millisecond) // the handler's API requests
				if err := msg.DoubleAck(ctx); err != nil {
					b.Error(err)
				}
				handled.Add(1)
			})
			publish("arrivals", run, 3)
			for deadline := time.Now().Add(time.Minute); handled.Load() < n; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%s: %d of %d handled after a minute", consumer.label, handled.Load(), n)
				}
			}
			stop()
		})
	}

	fmt.Printf("\n### What a stream on three nats-servers (R3) costs per arrival\n\n")
	fmt.Printf("%d events of %d bytes at %d a second; CPU of the three servers together, from /proc.\n\n", n, len(payload), arrivalRate)
	fmt.Println("| events | CPU s | per event | took |")
	fmt.Println("|---|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %s | %.2f | %.2f ms | %.1f s |\n", r.label, r.cpu, 1000*r.cpu/n, r.took.Seconds())
	}
}
