package drill

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// baseMemory is what a drill needs besides one revision's events: its throwaway etcd's heap,
// which indexes every key in memory, and the pages of the restored db its digest reads. A drill
// of TestDrill's small store peaked about 8 MiB above the test process's own resident memory;
// the rest is headroom for larger stores. It is a floor, not a fit: a store of many keys needs
// more.
const baseMemory = 44 << 20

// MemoryNeed is the least memory one drill with o needs: baseMemory, and one revision's events
// twice, decoded by the drill and held in etcd's transaction (o.MaxRevisionBytes, 10 MiB by
// default). By default 64 MiB: the least memoryBudget a RestoreDrill admits.
func (o Options) MemoryNeed() int64 {
	return baseMemory + 2*o.maxRevisionBytes()
}

// MemoryShare is the memory each of a run's concurrent drills may use: spec.memoryBudget over
// spec.concurrency (their defaults where unset). Nothing in a process holds a goroutine to it:
// the caller sizes what runs the drills by it (a container's limit, GOMEMLIMIT). A share below
// o.MemoryNeed() is an error that says how to fix the spec.
func MemoryShare(spec backupv1alpha1.RestoreDrillSpec, o Options) (int64, error) {
	budget := resource.MustParse(backupv1alpha1.DefaultDrillMemoryBudget)
	if spec.MemoryBudget != nil {
		budget = *spec.MemoryBudget
	}
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
