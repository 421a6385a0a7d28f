package entry

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Purges of one bucket that find no open store at the same time open it once: in a mass
// deletion each would otherwise read the BackupBucket and its credentials.
func TestStoresOpenOnceForConcurrentPurges(t *testing.T) {
	var stores openStores
	var opens atomic.Int32
	release := make(chan struct{})
	open := func() (objectstore.Store, error) {
		opens.Add(1)
		<-release
		return fakeStore{}, nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if store, err := stores.getOrOpen("bucket", open); err != nil || store == nil {
				t.Errorf("getOrOpen = %v, %v", store, err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // all eight on their way
	close(release)
	wg.Wait()
	if n := opens.Load(); n != 1 {
		t.Errorf("bucket opened %d times by 8 concurrent purges, want 1", n)
	}
	if _, err := stores.getOrOpen("bucket", open); err != nil || opens.Load() != 1 {
		t.Errorf("a later purge opened the bucket again (opens %d, err %v)", opens.Load(), err)
	}

	// A failed open is not kept: the next purge tries again.
	failing := errors.New("no credentials")
	if _, err := stores.getOrOpen("other", func() (objectstore.Store, error) { return nil, failing }); !errors.Is(err, failing) {
		t.Errorf("getOrOpen error %v, want %v", err, failing)
	}
	if _, err := stores.getOrOpen("other", open); err != nil || opens.Load() != 2 {
		t.Errorf("after a failed open the bucket was not opened again (opens %d, err %v)", opens.Load(), err)
	}
}

type fakeStore struct{ objectstore.Store }
