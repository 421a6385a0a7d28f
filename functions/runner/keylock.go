package runner

import (
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/housekeeper-dev/housekeeper/events"
)

// keyLock serialises the handling of events about the same object within a process: two
// events for one bucket handled at once would race each other's writes. Across processes,
// optimistic locking on the object's writes does the same job.
type keyLock struct {
	mu    sync.Mutex
	locks map[string]*keyEntry
}

type keyEntry struct {
	mu      sync.Mutex
	waiters int
}

func newKeyLock() *keyLock { return &keyLock{locks: map[string]*keyEntry{}} }

// objectKey is the object an event is about.
func objectKey(e cloudevents.Event) string {
	kind, _ := e.Extensions()[events.ExtKind].(string)
	return kind + "/" + e.Subject()
}

// lock blocks until the caller holds key; the returned function releases it.
func (k *keyLock) lock(key string) (unlock func()) {
	k.mu.Lock()
	entry, ok := k.locks[key]
	if !ok {
		entry = &keyEntry{}
		k.locks[key] = entry
	}
	entry.waiters++
	k.mu.Unlock()

	entry.mu.Lock()
	return func() {
		entry.mu.Unlock()
		k.mu.Lock()
		if entry.waiters--; entry.waiters == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
