package bridge

import (
	"context"
	"sync"
	"time"
)

// publishInterval spaces the bridge's publishes under load. A stream replicated on three
// nats-servers costs each server a read, a raft round and a write per arrival, however few
// messages arrive in it: 5,000 events published at 120 a second cost the three servers 4.7 s
// of CPU one at a time, 2.5 s in groups of three and 1.3 s in groups of twelve
// (BenchmarkArrivals). Publishes that come within this interval of the last go out together at
// its end; a publish after a quiet interval goes at once.
const publishInterval = 100 * time.Millisecond

// pacer releases the publishes waiting for it together, at most once per interval, or as soon
// as size of them wait (no more can join the group). Only publishes from several goroutines at
// once form a group: a publisher that waits for each ack before its next publish is only slowed,
// so the bridge's dispatchers, which do not wait for acks, are its one user.
type pacer struct {
	interval time.Duration
	size     int

	mu      sync.Mutex
	last    time.Time     // when the last group went
	group   chan struct{} // closed when the waiting group goes; nil while none waits
	waiting int
}

func newPacer(interval time.Duration, size int) *pacer {
	return &pacer{interval: interval, size: size}
}

// wait returns when the caller's publish may go: at once after a quiet interval, else with
// the group at the end of the interval. It returns early when ctx is done.
func (p *pacer) wait(ctx context.Context) {
	p.mu.Lock()
	now := time.Now()
	if p.group == nil && now.Sub(p.last) >= p.interval {
		p.last = now
		p.mu.Unlock()
		return
	}
	if p.group == nil {
		group := make(chan struct{})
		p.group = group
		time.AfterFunc(p.interval-now.Sub(p.last), func() { p.release(group) })
	}
	group := p.group
	p.waiting++
	full := p.waiting >= p.size
	p.mu.Unlock()
	if full {
		p.release(group)
	}
	select {
	case <-group:
	case <-ctx.Done():
	}
}

// release lets group go, if it is still the waiting one.
func (p *pacer) release(group chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.group != group {
		return // went already
	}
	p.group, p.waiting, p.last = nil, 0, time.Now()
	close(group)
}
