package faults

import (
	"context"
	"fmt"
	"sync"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// purgeWatch looks at the blobs of every deleted entry, by the workload's own clock: until the
// entry is due every blob must be there, and after it the prefix must become empty. It reads
// the buckets, not housekeeper's events, which are best-effort; and the API server (directly,
// never through an outage) for when each deleted object is gone, its finalizers released.
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
	// goneAt is when each deleted object was first seen gone (or replaced by a new one of its
	// name), by the index of the deletion.
	goneAt map[int]time.Time
	// names maps an entry name to the index of its latest deletion.
	names map[string]int
}

func newPurgeWatch(w *workload) *purgeWatch {
	p := &purgeWatch{w: w, purgedAt: map[int]time.Time{}, goneAt: map[int]time.Time{}, names: map[string]int{}}
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
			_, purged := p.purgedAt[i]
			_, gone := p.goneAt[i]
			p.mu.Unlock()
			if purged && gone {
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if !purged {
					p.sample(ctx, i, d)
				}
				if !gone {
					p.sampleObject(ctx, i, d)
				}
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

// sampleObject reads one deleted entry's object once: gone once it is not found, or found with
// another uid (re-created).
func (p *purgeWatch) sampleObject(ctx context.Context, i int, d deletion) {
	e := &extensionsv1alpha1.BackupEntry{}
	err := p.w.r.client.Get(ctx, client.ObjectKey{Name: d.name}, e)
	end := time.Now()
	if err != nil && !apierrors.IsNotFound(err) {
		return // a restarting API server: no sample
	}
	if err == nil && string(e.UID) == d.uid {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.goneAt[i] = end
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
	// outages is what each dependency outage left to do, and when it was done.
	outages []outageStats
}

// afterReturn bounds the time from a dependency's return until the work its outage held up is
// done: every purge due by then completed, every such entry's finalizers released.
const afterReturn = 60 * time.Second

// outageStats is one outage's work, by the workload's clock: the deletions due by the
// dependency's return that were not done when it went away.
type outageStats struct {
	window
	// dueDuring counts the deletions that came due while the dependency was away.
	dueDuring int
	// purged follows their prefixes, released their objects (gone once their finalizers are).
	purged, released outageWork
}

// outageWork is one kind of work an outage held up.
type outageWork struct {
	// n counts the deletions due by the return whose work was not done when the outage began.
	n int
	// late lists those not done within afterReturn of the return (or not yet, once that
	// passed); pending those not done yet, with time left.
	late, pending []string
	// last is the time from the return to the last of them done (negative: all before it).
	last time.Duration
}

func (p *purgeWatch) stats(windows []window) purgeStats {
	deletions := p.w.sentDeletions()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := purgeStats{samples: p.samples, early: append([]string(nil), p.early...)}
	now := time.Now()
	for _, w := range windows {
		if isOutage(w.kind) {
			s.outages = append(s.outages, p.outage(w, deletions, now))
		}
	}
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

// outage measures what outage w held up. Call with p.mu held.
func (p *purgeWatch) outage(w window, deletions []deletion, now time.Time) outageStats {
	o := outageStats{window: w, purged: outageWork{last: -w.to.Sub(w.from)}, released: outageWork{last: -w.to.Sub(w.from)}}
	limit := w.to.Add(afterReturn)
	follow := func(work *outageWork, name, what string, at time.Time, done bool) {
		if done && at.Before(w.from) {
			return // done before the outage
		}
		work.n++
		switch {
		case done && !at.After(limit):
			work.last = max(work.last, at.Sub(w.to))
		case done:
			work.late = append(work.late, fmt.Sprintf("%s %s %s after the return", name, what, at.Sub(w.to).Round(100*time.Millisecond)))
		case now.After(limit):
			work.late = append(work.late, fmt.Sprintf("%s not %s %s after the return", name, what, now.Sub(w.to).Round(100*time.Millisecond)))
		default:
			work.pending = append(work.pending, name+" not "+what+" yet")
		}
	}
	for i, d := range deletions {
		if d.due.After(w.to) {
			continue
		}
		if !d.due.Before(w.from) {
			o.dueDuring++
		}
		at, done := p.purgedAt[i]
		follow(&o.purged, d.name, "purged", at, done)
		at, done = p.goneAt[i]
		follow(&o.released, d.name, "released", at, done)
	}
	return o
}
