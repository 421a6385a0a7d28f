package bridge

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A publish after a quiet interval goes at once; those within the interval of it wait and go
// together at its end; a full group goes without waiting.
func TestPacerGroupsPublishesWithinItsInterval(t *testing.T) {
	const interval = 200 * time.Millisecond
	ctx := context.Background()
	p := newPacer(interval, 3)

	start := time.Now()
	p.wait(ctx)
	if took := time.Since(start); took > interval/4 {
		t.Fatalf("the first publish after a quiet interval waited %s", took)
	}

	var wg sync.WaitGroup
	released := make([]time.Time, 2)
	for i := range released {
		wg.Go(func() { p.wait(ctx); released[i] = time.Now() })
	}
	wg.Wait()
	for i, at := range released {
		if waited := at.Sub(start); waited < interval*3/4 {
			t.Errorf("publish %d of the group went %s after the first, within the interval of %s", i, waited, interval)
		}
	}
	if gap := released[0].Sub(released[1]).Abs(); gap > interval/4 {
		t.Errorf("the group's publishes went %s apart, not together", gap)
	}

	// Three waiting fill the group: it goes before the interval ends.
	time.Sleep(interval / 10)
	start = time.Now()
	for range 3 {
		wg.Go(func() { p.wait(ctx) })
	}
	wg.Wait()
	if took := time.Since(start); took > interval/2 {
		t.Errorf("a full group waited %s", took)
	}
}

// A publish waiting for its group returns when its context ends.
func TestPacerWaitEndsWithItsContext(t *testing.T) {
	p := newPacer(time.Hour, 10)
	p.wait(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	p.wait(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("wait returned %s after its context ended", took)
	}
}
