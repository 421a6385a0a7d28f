package faults

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// purgeWatch looks at the blobs of every deleted entry, by the workload's own clock: until the
// entry is due every blob must be there, and after it the prefix must become empty. It reads
// the buckets, not housekeeper's events, which are best-effort.
type purgeWatch struct {
	w *workload

	mu sync.Mutex
	// samples counts listings that ended before their entry was due.
	samples int
	// early names entries found missing blobs before they were due.
	early []string
	// purgedAt is when each deletion's prefix was first seen empty after it was due, by the
	// index of the deletion.
	purgedAt map[int]time.Time
	// names maps an entry name to the index of its latest deletion.
	names map[string]int
}

func newPurgeWatch(w *workload) *purgeWatch {
	p := &purgeWatch{w: w, purgedAt: map[int]time.Time{}, names: map[string]int{}}
	w.watch = p
	return p
}

// run samples every deletion not yet seen purged until ctx ends.
func (p *purgeWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i, d := range p.w.sentDeletions() {
			p.mu.Lock()
			p.names[d.name] = i
			_, done := p.purgedAt[i]
			p.mu.Unlock()
			if done {
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				p.sample(ctx, i, d)
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sample lists one deleted entry's prefix once.
func (p *purgeWatch) sample(ctx context.Context, i int, d deletion) {
	keys, err := p.w.list(ctx, d.bucket, gardener.EntryPrefix(d.name))
	end := time.Now()
	if err != nil {
		return // a restarting store: no sample
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case end.Before(d.due):
		p.samples++
		if len(keys) < len(d.keys) {
			p.early = append(p.early, fmt.Sprintf("%s: %d of %d blobs left at %s, due %s", d.name, len(keys), len(d.keys),
				end.Format("15:04:05.000"), d.due.Format("15:04:05.000")))
		}
	case len(keys) == 0:
		p.purgedAt[i] = end
	}
}

// purged reports whether the latest deletion of name was seen purged.
func (p *purgeWatch) purged(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.names[name]
	if !ok {
		return false
	}
	_, done := p.purgedAt[i]
	return done
}

// purgeStats is what the watch saw.
type purgeStats struct {
	samples int
	early   []string
	// due counts deletions past their due time; purged those seen purged, overlapped those
	// whose purge (from due to seen empty) overlapped a fault.
	due, purged, overlapped int
	// deletionsInFaults counts deletions in flight while a fault was in effect.
	deletionsInFaults int
	// dueLeaderless counts completed purges that came due while the stream had no leader (its
	// leader killed, or quorum lost): their schedules fired on the next leader.
	dueLeaderless int
}

func (p *purgeWatch) stats(windows []window) purgeStats {
	deletions := p.w.sentDeletions()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := purgeStats{samples: p.samples, early: append([]string(nil), p.early...)}
	now := time.Now()
	for i, d := range deletions {
		if overlapsFault(windows, d.sent, d.accepted) {
			s.deletionsInFaults++
		}
		if d.due.After(now) {
			continue
		}
		s.due++
		at, done := p.purgedAt[i]
		if !done {
			continue
		}
		s.purged++
		if overlapsFault(windows, d.due, at) {
			s.overlapped++
		}
		for _, w := range windows {
			if leavesStreamLeaderless(w.kind) && !d.due.Before(w.from) && !d.due.After(w.to) {
				s.dueLeaderless++
				break
			}
		}
	}
	return s
}
