package bridge

import (
	"fmt"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// objectHandler turns informer notifications for objects of kind k into queued events.
func (b *Bridge) objectHandler(k *kind) cache.ResourceEventHandler {
	return handler[client.Object]{
		add: func(obj client.Object, isInInitialList bool) {
			if isInInitialList {
				b.listed(k, obj)
			} else {
				b.enqueue(k, events.OpCreated, obj)
			}
			b.watchSecretsOf(k, obj, !isInInitialList)
		},
		update: func(old, cur client.Object) {
			if was, is := b.secretNamespace(k, old), b.secretNamespace(k, cur); was != is {
				b.watchSecretsOf(k, cur, true)
				b.secrets.release(was)
			}
			switch {
			case old.GetResourceVersion() == cur.GetResourceVersion():
				b.announceUnchanged(k, cur) // a relist or the periodic resync
			case !relevantChange(old, cur):
				if b.secretAppearedWhileWaiting(k, old, cur) { // a status write: no news, but late
					b.enqueue(k, events.OpSynced, cur, events.WithTrigger("secret-present"))
				}
			case cur.GetDeletionTimestamp() != nil:
				b.enqueue(k, events.OpDeleting, cur)
			default:
				b.enqueue(k, events.OpUpdated, cur)
			}
		},
		delete: func(obj client.Object) {
			if b.opts.RecordDeletions {
				b.enqueue(k, events.OpDeleted, obj)
			} else {
				b.announced.forget(queueKey(k.kind, obj))
			}
			b.secrets.release(b.secretNamespace(k, obj))
			if h, ok := k.holds(obj); ok {
				b.announceHeld(h)
			}
		},
	}.funcs()
}

// again makes the announcement of obj, listed again unchanged (at the start of a term, after a
// watch's gap, at a resync), new to JetStream's duplicate window if obj has work outstanding
// (outstanding): the event of its unchanged state may have been delivered minutes ago and
// dead-lettered or lost with a crashed worker; a new one has its function try again now, not
// after the window. It returns nil for an object with nothing outstanding (announceUnchanged).
func (b *Bridge) again(k *kind, o client.Object) []events.ObjectEventOption {
	if !outstanding(k, o) {
		return nil
	}
	return []events.ObjectEventOption{events.WithTrigger(fmt.Sprintf("outstanding/%s/%d", b.term, b.announcements.Add(1)))}
}

// outstanding reports whether o, of kind k, has work left for a function: it is deleting,
// carries an annotation a function acts on (gardenlet's operation: reconcile, restore, migrate;
// a key rotation), or it is an extension object whose last operation is missing, did not
// succeed, or is of an older generation. Upstream's extension predicate reconciles the same at
// start.
func outstanding(k *kind, o client.Object) bool {
	if o.GetDeletionTimestamp() != nil {
		return true
	}
	switch o.GetAnnotations()[operationAnnotation] {
	case gardener.OperationReconcile, gardener.OperationRestore, gardener.OperationMigrate:
		return true
	}
	if _, ok := o.GetAnnotations()[azureRotateAnnotation]; ok {
		return true
	}
	x, ok := k.extension(o)
	if !ok {
		return false
	}
	status := x.GetExtensionStatus()
	last := status.GetLastOperation()
	return last == nil || last.State != gardencorev1beta1.LastOperationStateSucceeded || status.GetObservedGeneration() != o.GetGeneration()
}

// announceHeld announces again h, whose deletion waited for an object that went, if h is being
// deleted (a bucket, when one of its entries went).
func (b *Bridge) announceHeld(h held) {
	inf := b.informerOf(h.kind)
	if inf == nil {
		return
	}
	if o, ok := getAs[client.Object](inf.GetStore(), h.name); ok && o.GetDeletionTimestamp() != nil {
		b.enqueue(kindOf(h.kind), events.OpSynced, o, events.WithTrigger(h.trigger))
	}
}

// watchSecretsOf makes sure the secrets in the namespace of obj's spec.secretRef are watched.
// announceExisting is false for the objects of the initial list (see secretHandler).
func (b *Bridge) watchSecretsOf(k *kind, obj client.Object, announceExisting bool) {
	if ns := b.secretNamespace(k, obj); ns != "" {
		b.secrets.watch(ns, announceExisting)
	}
}

func (b *Bridge) enqueue(k *kind, op events.Operation, o client.Object, opts ...events.ObjectEventOption) {
	if !b.filter.handles(k, o) {
		return
	}
	opts = append(opts, events.WithInputs(b.inputsOf(k, o)))
	e, err := objectEvent(b.opts.Cluster, k.kind, op, o, opts...)
	if err != nil {
		b.log.Error("cannot build event", zap.String("kind", string(k.kind)), zap.String("name", o.GetName()), zap.Error(err))
		return
	}
	key := queueKey(k.kind, o)
	b.announced.drop(key) // held in its initial list's state: this event is newer
	b.queue.add(key, e)
}

// namespaceHandler is the handler of the namespaces informer: a namespace's appearance, or a change
// of the shoot it belongs to (gardener.ShootUIDAnnotation), announces again the objects whose
// control-plane namespace it is, so that their functions write into it now (an entry writes its
// etcd-backup secret only into its own shoot's namespace).
func (b *Bridge) namespaceHandler() cache.ResourceEventHandler {
	return handler[*corev1.Namespace]{
		add: func(ns *corev1.Namespace, isInInitialList bool) {
			if !isInInitialList { // at start every object's inputs, its namespace among them, are compared (release)
				b.announceControlledBy(ns.Name, "namespace/"+string(ns.UID))
			}
		},
		update: func(old, ns *corev1.Namespace) {
			if old.Annotations[gardener.ShootUIDAnnotation] != ns.Annotations[gardener.ShootUIDAnnotation] {
				b.announceControlledBy(ns.Name, "namespace/"+string(ns.UID)+"/"+ns.ResourceVersion)
			}
		},
	}.funcs()
}

// announceControlledBy announces again the objects whose control-plane namespace is namespace.
func (b *Bridge) announceControlledBy(namespace, trigger string) {
	for _, w := range b.watches {
		inf := w.informer()
		if inf == nil {
			continue
		}
		objs, err := inf.GetIndexer().ByIndex(byControlPlane, namespace)
		if err != nil {
			continue
		}
		for _, o := range listAs[client.Object](objs) {
			b.enqueue(w.kind, events.OpSynced, o, events.WithTrigger(trigger))
		}
	}
}

// Resync announces every handled object again as synced, tagged with trigger so that the
// events are new to JetStream's duplicate window. It returns how many objects it queued.
func (b *Bridge) Resync(trigger string) int {
	n := 0
	for _, w := range b.watches {
		inf := w.informer()
		if inf == nil {
			continue
		}
		for _, o := range listAs[client.Object](inf.GetStore().List()) {
			if b.filter.handles(w.kind, o) {
				b.enqueue(w.kind, events.OpSynced, o, events.WithTrigger("resync/"+trigger))
				n++
			}
		}
	}
	return n
}
