package bridge

import (
	"context"
	"slices"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// secretWatch runs one Secret informer per namespace that a handled BackupBucket or
// BackupEntry names in spec.secretRef.namespace (in Gardener, the seed's garden namespace),
// and none elsewhere: the bridge must not list and cache every secret of a seed to find the
// few it needs. A label selector cannot do this, since the secrets gardenlet copies carry no
// common label. An informer starts when its namespace is first referenced and stops when no
// object references it any longer.
type secretWatch struct {
	client rest.Interface
	// inUse says whether a handled object's spec.secretRef is in a namespace.
	inUse func(namespace string) bool
	// handler builds the event handler of a namespace's informer; announceExisting is true for
	// an informer started after the bridge's initial sync (see ensure).
	handler func(announceExisting bool) cache.ResourceEventHandler
	log     *zap.Logger

	mu         sync.Mutex
	ctx        context.Context // nil until run and after stop: nothing starts then
	running    sync.WaitGroup
	namespaces map[string]*namespaceSecrets
}

// namespaceSecrets is the informer of one namespace's secrets.
type namespaceSecrets struct {
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced
	stop     context.CancelFunc
}

// run lets informers start from now on; they run until ctx is done or stop is called.
func (w *secretWatch) run(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctx = ctx
}

// stop stops every informer and waits until they returned.
func (w *secretWatch) stop() {
	w.mu.Lock()
	for _, ns := range w.namespaces {
		ns.stop()
	}
	w.namespaces, w.ctx = nil, nil
	w.mu.Unlock()
	w.running.Wait()
}

// watch starts watching namespace's secrets unless it does already; announceExisting: see
// handler.
func (w *secretWatch) watch(namespace string, announceExisting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil || w.namespaces[namespace] != nil {
		return
	}
	if err := w.start(namespace, announceExisting); err != nil {
		w.log.Error("cannot watch secrets", zap.String("namespace", namespace), zap.Error(err))
	}
}

// release stops watching namespace's secrets if no handled object references it any longer.
// It is called after the change of a referencing object reached the informers' stores, so
// whichever of several racing calls comes last sees the current references.
func (w *secretWatch) release(namespace string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns := w.namespaces[namespace]
	if ns == nil || w.inUse(namespace) {
		return
	}
	ns.stop()
	delete(w.namespaces, namespace)
	w.log.Info("stopped watching secrets: no object references the namespace", zap.String("namespace", namespace))
}

func (w *secretWatch) start(namespace string, announceExisting bool) error {
	inf := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(w.client, "secrets", namespace, fields.Everything()),
		&corev1.Secret{}, 0, cache.Indexers{})
	if err := inf.SetTransform(digestSecret); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(w.handler(announceExisting))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(w.ctx)
	if w.namespaces == nil {
		w.namespaces = map[string]*namespaceSecrets{}
	}
	w.namespaces[namespace] = &namespaceSecrets{informer: inf, synced: reg.HasSynced, stop: cancel}
	w.running.Go(func() { inf.RunWithContext(ctx) })
	w.log.Info("watching secrets", zap.String("namespace", namespace))
	return nil
}

// has says whether the secret namespace/name is in the cache of a running informer.
func (w *secretWatch) has(namespace, name string) bool {
	w.mu.Lock()
	ns := w.namespaces[namespace]
	w.mu.Unlock()
	if ns == nil {
		return false
	}
	_, exists, err := ns.informer.GetStore().GetByKey(namespace + "/" + name)
	return err == nil && exists
}

// digest is the digest of the data of namespace's secret name as the informer cached it
// (digestSecret), "" if it is not there or not watched.
func (w *secretWatch) digest(namespace, name string) string {
	w.mu.Lock()
	ns := w.namespaces[namespace]
	w.mu.Unlock()
	if ns == nil {
		return ""
	}
	s, ok := getAs[*corev1.Secret](ns.informer.GetStore(), namespace+"/"+name)
	if !ok {
		return ""
	}
	return s.Annotations[secretDigestAnnotation]
}

// hasSynced reports whether every informer running now delivered its initial list.
func (w *secretWatch) hasSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ns := range w.namespaces {
		if !ns.synced() {
			return false
		}
	}
	return true
}

// watched lists the namespaces whose secrets are watched now.
func (w *secretWatch) watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.namespaces))
	for name := range w.namespaces {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
