package drill

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// baseMemory is what a drill needs besides its keys and one revision's events: its throwaway
// etcd's server and raft log (about 3,500 applied revisions' transactions), the pages of the
// restored db its digest reads, and the collector's room to work. With keyMemory it fits
// the measurements in test/bench/README.md: MemoryNeed is the need of a store without keys, a floor.
const baseMemory = 44 << 20

// keyMemory is what each key of the restored store adds to a drill's need: etcd indexes every
// key in memory. README's "The drill's memory budget" measured the drill's anonymous memory at
// about 100 MiB and 0.6 KiB a key without a limit, a third to a half of it the collector's
// headroom; under GOMEMLIMIT=128MiB a drill of 131,072 keys ran as fast as without (under
// 64MiB it took 1.7 times the CPU, its collector running all the time). 512 bytes a key puts
// that store at MemoryNeed's 64 MiB + 64 MiB = 128 MiB, the limit at which it ran at full speed
// (and one of 8,192 keys at 68 MiB: under 64MiB it took 1.2 times as long). Those limits held
// the whole measuring process, its own heap included.
const keyMemory = 512

// MemoryNeed is the least memory one drill with o needs: baseMemory, and one revision's events
// twice, decoded by the drill and held in etcd's transaction (o.MaxRevisionBytes, 10 MiB by
// default). By default 64 MiB: the least memoryBudget a RestoreDrill admits. Each key of the
// store adds keyMemory (storeNeed).
func (o Options) MemoryNeed() int64 {
	return baseMemory + 2*o.maxRevisionBytes()
}

// storeNeed is what a drill with o needs for a store of keys keys, rounded up to a MiB.
func (o Options) storeNeed(keys int64) int64 {
	return roundUpMiB(o.MemoryNeed() + keys*keyMemory)
}

// MemoryBudget is spec.memoryBudget, its default where unset: what a run of the RestoreDrill
// may use in all.
func MemoryBudget(spec backupv1alpha1.RestoreDrillSpec) resource.Quantity {
	if spec.MemoryBudget != nil {
		return *spec.MemoryBudget
	}
	return resource.MustParse(backupv1alpha1.DefaultDrillMemoryBudget)
}

// MemoryShare is the memory each of a run's concurrent drills may use: spec.memoryBudget over
// spec.concurrency (their defaults where unset). The drill function's MemoryGate holds a run
// to its budget, and a drill given its share as Options.MemoryShare checks its store's keys
// against it and gives it to its restorer, the process its etcd runs in, as its soft limit. A share below o.MemoryNeed() is an error that says how to fix the spec.
func MemoryShare(spec backupv1alpha1.RestoreDrillSpec, o Options) (int64, error) {
	budget := MemoryBudget(spec)
	concurrency := int64(spec.Concurrency)
	if concurrency == 0 {
		concurrency = backupv1alpha1.DefaultDrillConcurrency
	}
	if concurrency < 0 {
		return 0, fmt.Errorf("concurrency %d is not positive", concurrency)
	}
	share, need := budget.Value()/concurrency, o.MemoryNeed()
	switch {
	case budget.Value() < need:
		return share, fmt.Errorf("memoryBudget %s is below the %s one drill needs", budget.String(), quantity(need))
	case share < need:
		return share, fmt.Errorf("memoryBudget %s over concurrency %d leaves each drill %s, below the %s a drill needs: raise memoryBudget to %s or lower concurrency to %d",
			budget.String(), concurrency, quantity(share), quantity(need), quantity(need*concurrency), budget.Value()/need)
	}
	return share, nil
}

// quantity writes n bytes as Kubernetes does (64Mi).
func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
