package drill

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ProcessMemoryReserve is the memory the drill function keeps for itself beside its runs'
// budgets: its heap without a drill (the Kubernetes and NATS clients, the object store
// clients, the runtime) is 20–30 MiB.
const ProcessMemoryReserve = 64 << 20

// MemoryGate holds a process's drill runs to the memory its container has: a run takes its
// whole memoryBudget from the container's limit less ProcessMemoryReserve before it drills,
// and waits while other runs hold it, in the order they came (a large budget is not starved
// by small ones); one whose budget would never fit is refused. While runs drill, the Go soft
// memory limit is ProcessMemoryReserve and their budgets, so that the collector works before
// the container runs out; each drill's restorer, a process in the same container, has its
// share as its own. A nil *MemoryGate holds nothing.
type MemoryGate struct {
	limit    int64               // the container's memory limit; 0: none
	capacity *semaphore.Weighted // limit less ProcessMemoryReserve; nil without a limit
	setLimit func(int64) int64   // debug.SetMemoryLimit

	mu   sync.Mutex
	held int64 // the budgets of the runs drilling
	soft int64 // the soft limit without runs: GOMEMLIMIT, or none (math.MaxInt64)
}

// NewMemoryGate is the gate of a process in a container limited to containerLimit bytes (0:
// none, as outside a container: nothing is refused and runs do not wait for one another).
func NewMemoryGate(containerLimit int64) *MemoryGate {
	return newMemoryGate(containerLimit, debug.SetMemoryLimit)
}

func newMemoryGate(containerLimit int64, setLimit func(int64) int64) *MemoryGate {
	g := &MemoryGate{limit: containerLimit, setLimit: setLimit, soft: setLimit(-1)}
	if containerLimit > 0 {
		g.capacity = semaphore.NewWeighted(g.available())
	}
	return g
}

// available is what the runs may hold at once.
func (g *MemoryGate) available() int64 { return max(0, g.limit-ProcessMemoryReserve) }

// take holds budget for a run until release is called. A budget above what the container
// leaves the runs is an invalidDrill that says how to fix it; otherwise take waits for room,
// as long as ctx lets it.
func (g *MemoryGate) take(ctx context.Context, budget resource.Quantity, log *zap.Logger) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	n := budget.Value()
	if g.capacity != nil {
		if n > g.available() {
			return nil, invalidDrill(fmt.Errorf("memoryBudget %s is above the %s the drill function may use (its container's memory limit %s less %s for the process): raise functions.drill.resources.limits.memory to %s or lower memoryBudget",
				budget.String(), quantity(g.available()), quantity(g.limit), quantity(ProcessMemoryReserve), quantity(roundUpMiB(n+ProcessMemoryReserve))))
		}
		if !g.capacity.TryAcquire(n) {
			log.Info("waiting for memory: other runs hold it", zap.Int64("memoryBudgetBytes", n), zap.Int64("availableBytes", g.available()))
			if err := g.capacity.Acquire(ctx, n); err != nil {
				return nil, err
			}
		}
	}
	g.hold(n)
	return sync.OnceFunc(func() {
		g.hold(-n)
		if g.capacity != nil {
			g.capacity.Release(n)
		}
	}), nil
}

// hold adds n to the runs' budgets and sets the soft limit to them and ProcessMemoryReserve,
// never above the limit the process started with (an operator's GOMEMLIMIT); back to that
// without runs.
func (g *MemoryGate) hold(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held += n
	limit := g.soft
	if g.held > 0 {
		limit = min(g.soft, ProcessMemoryReserve+g.held)
	}
	g.setLimit(limit)
}

// roundUpMiB rounds n bytes up to a whole MiB.
func roundUpMiB(n int64) int64 {
	const mib = 1 << 20
	return (n + mib - 1) / mib * mib
}
