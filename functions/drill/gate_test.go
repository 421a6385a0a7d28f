package drill

import (
	"context"
	"errors"
	"math"
	"runtime/debug"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/api/resource"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
)

// softLimit stands in for debug.SetMemoryLimit.
type softLimit struct{ limit int64 }

func (s *softLimit) set(n int64) int64 {
	old := s.limit
	if n >= 0 {
		s.limit = n
	}
	return old
}

func TestMemoryGateRefusesABudgetTheContainerCannotHold(t *testing.T) {
	g := newMemoryGate(768<<20, (&softLimit{math.MaxInt64}).set)
	_, err := g.take(context.Background(), resource.MustParse("2Gi"), zaptest.NewLogger(t))
	var invalid *destination.Problem
	want := "memoryBudget 2Gi is above the 704Mi the drill function may use (its container's memory limit 768Mi less 64Mi for the process): raise functions.drill.resources.limits.memory to 2112Mi or lower memoryBudget"
	if !errors.As(err, &invalid) || invalid.Reason != backupv1alpha1.ReasonInvalidDrill || invalid.Message != want {
		t.Fatalf("error %v, want an invalid drill: %s", err, want)
	}
	// What fits exactly is taken.
	release, err := g.take(context.Background(), resource.MustParse("704Mi"), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	release()

	tiny := newMemoryGate(48<<20, (&softLimit{math.MaxInt64}).set)
	if _, err := tiny.take(context.Background(), resource.MustParse("64Mi"), zaptest.NewLogger(t)); !errors.As(err, &invalid) {
		t.Errorf("a container of 48Mi took a budget of 64Mi: %v", err)
	}
}

func TestMemoryGateWaitsForRoom(t *testing.T) {
	g := newMemoryGate(768<<20, (&softLimit{math.MaxInt64}).set)
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	first, err := g.take(ctx, resource.MustParse("512Mi"), log)
	if err != nil {
		t.Fatal(err)
	}
	// A budget that fits beside it does not wait.
	small, err := g.take(ctx, resource.MustParse("192Mi"), log)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan func(), 1)
	go func() {
		release, err := g.take(ctx, resource.MustParse("512Mi"), log)
		if err != nil {
			t.Error(err)
		}
		taken <- release
	}()
	select {
	case <-taken:
		t.Fatal("two runs of 512Mi hold a capacity of 704Mi at once")
	case <-time.After(100 * time.Millisecond):
	}
	small()
	select {
	case <-taken:
		t.Fatal("a run of 512Mi took its memory while another of 512Mi held it")
	case <-time.After(100 * time.Millisecond):
	}
	first()
	first() // released once, however often called
	select {
	case second := <-taken:
		second()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting run did not take the memory released")
	}

	// A run waiting while its process shuts down gives up.
	hold, err := g.take(ctx, resource.MustParse("704Mi"), log)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	cancelled, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := g.take(cancelled, resource.MustParse("64Mi"), log); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past its context: %v", err)
	}
}

// While runs drill, the soft limit is the process's reserve and their budgets; without runs it
// is what it was.
func TestMemoryGateSoftLimit(t *testing.T) {
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	for _, tc := range []struct {
		name      string
		container int64
		start     int64 // the soft limit the process started with
		// the soft limit with a run of 512Mi, with one of 128Mi beside it, and after the first
		// ends
		want [3]int64
	}{
		{name: "no GOMEMLIMIT, no container limit", start: math.MaxInt64, want: [3]int64{576 << 20, 704 << 20, 192 << 20}},
		{name: "no GOMEMLIMIT, a container limit", container: 768 << 20, start: math.MaxInt64, want: [3]int64{576 << 20, 704 << 20, 192 << 20}},
		{name: "an operator's GOMEMLIMIT is never raised", container: 768 << 20, start: 600 << 20, want: [3]int64{576 << 20, 600 << 20, 192 << 20}},
	} {
		soft := &softLimit{tc.start}
		g := newMemoryGate(tc.container, soft.set)
		big, err := g.take(ctx, resource.MustParse("512Mi"), log)
		if err != nil {
			t.Fatal(err)
		}
		got := [3]int64{soft.limit}
		small, err := g.take(ctx, resource.MustParse("128Mi"), log)
		if err != nil {
			t.Fatal(err)
		}
		got[1] = soft.limit
		big()
		got[2] = soft.limit
		small()
		if got != tc.want || soft.limit != tc.start {
			t.Errorf("%s: soft limits %v and %d without runs, want %v and %d", tc.name, got, soft.limit, tc.want, tc.start)
		}
	}
}

// The gate sets the process's own soft limit, and puts it back.
func TestMemoryGateSetsTheProcesssSoftLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	g := NewMemoryGate(0)
	release, err := g.take(context.Background(), resource.MustParse("128Mi"), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	during := debug.SetMemoryLimit(-1)
	release()
	if after := debug.SetMemoryLimit(-1); during != min(before, 192<<20) || after != before {
		t.Errorf("soft limit %d during a run of 128Mi, %d after, want %d and %d", during, after, min(before, 192<<20), before)
	}
}

func TestNoMemoryGateHoldsNothing(t *testing.T) {
	var g *MemoryGate
	release, err := g.take(context.Background(), resource.MustParse("1Ti"), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	release()
}
