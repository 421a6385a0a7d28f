package runner

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeyLockSerialisesOneKeyOnly(t *testing.T) {
	k := newKeyLock()
	var inA, maxA, inB atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			unlock := k.lock("BackupBucket/a")
			n := inA.Add(1)
			if n > maxA.Load() {
				maxA.Store(n)
			}
			time.Sleep(5 * time.Millisecond)
			inA.Add(-1)
			unlock()
		})
	}
	blocked := make(chan struct{})
	wg.Go(func() {
		unlock := k.lock("BackupBucket/b") // another object is not held up by a
		inB.Add(1)
		unlock()
		close(blocked)
	})
	select {
	case <-blocked:
	case <-time.After(time.Second):
		t.Fatal("a lock on one object blocked another object")
	}
	wg.Wait()
	if maxA.Load() != 1 {
		t.Errorf("%d handlers of one object ran at once", maxA.Load())
	}
	if len(k.locks) != 0 {
		t.Errorf("%d locks left behind", len(k.locks))
	}
}
