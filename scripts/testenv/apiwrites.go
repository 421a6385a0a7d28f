package testenv

import (
	"fmt"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// APIWrites is the order in which a fake API server (the fast tests' interceptors) saw the
// writes of one run: "create Secret ns/name", "patch BackupEntry name", "status BackupEntry
// name", "delete Secret ns/name".
type APIWrites struct {
	mu  sync.Mutex
	all []string
}

// Add records a write: verb, then obj's kind and namespace/name.
func (w *APIWrites) Add(verb string, obj client.Object) {
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := apiutil.GVKForObject(obj, kube.Scheme); err == nil {
		kind = gvk.Kind
	}
	name := obj.GetName()
	if obj.GetNamespace() != "" {
		name = obj.GetNamespace() + "/" + name
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, verb+" "+kind+" "+name)
}

// List returns the writes recorded so far, in order.
func (w *APIWrites) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.all)
}

// Reset forgets the writes recorded so far (those of a test's set-up).
func (w *APIWrites) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = nil
}
