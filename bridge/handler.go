package bridge

import (
	"fmt"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// objectHandler turns informer notifications for kind into queued events.
func (b *Bridge) objectHandler(kind events.Kind) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if isInInitialList {
				b.listed(kind, obj.(client.Object))
			} else {
				b.enqueue(kind, events.OpCreated, obj)
			}
			b.watchSecretsOf(obj, !isInInitialList)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, cur := oldObj.(client.Object), newObj.(client.Object)
			if was, is := b.secretNamespace(old), b.secretNamespace(cur); was != is {
				b.watchSecretsOf(cur, true)
				b.secrets.release(was)
			}
			switch {
			case old.GetResourceVersion() == cur.GetResourceVersion():
				b.announceUnchanged(kind, cur) // a relist or the periodic resync
			case !relevantChange(old, cur):
				if b.secretAppearedWhileWaiting(old, cur) { // a status write: no news, but late
					b.enqueue(kind, events.OpSynced, cur, events.WithTrigger("secret-present"))
				}
			case cur.GetDeletionTimestamp() != nil:
				b.enqueue(kind, events.OpDeleting, cur)
			default:
				b.enqueue(kind, events.OpUpdated, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			b.enqueue(kind, events.OpDeleted, obj)
			b.secrets.release(b.secretNamespace(obj))
			if e, ok := obj.(*extensionsv1alpha1.BackupEntry); ok {
				b.entryGone(e)
			}
		},
	}
}

// again makes the announcement of obj, listed again unchanged (at the start of a term, after a
// watch's gap, at a resync), new to JetStream's duplicate window if obj has work outstanding
// (outstanding): the event of its unchanged state may have been delivered minutes ago and
// dead-lettered or lost with a crashed worker; a new one has its function try again now, not
// after the window. It returns nil for an object with nothing outstanding (announceUnchanged).
func (b *Bridge) again(obj any) []events.ObjectEventOption {
	o, ok := obj.(client.Object)
	if !ok || !outstanding(o) {
		return nil
	}
	return []events.ObjectEventOption{events.WithTrigger(fmt.Sprintf("outstanding/%s/%d", b.term, b.announcements.Add(1)))}
}

// outstanding reports whether o has work left for a function: it is deleting, carries an
// annotation a function acts on (gardenlet's operation: reconcile, restore, migrate; a key
// rotation), or it is an extension object whose last operation is missing, did not succeed, or
// is of an older generation. Upstream's extension predicate reconciles the same at start.
func outstanding(o client.Object) bool {
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
	x, ok := o.(extensionsv1alpha1.Object)
	if !ok {
		return false
	}
	status := x.GetExtensionStatus()
	last := status.GetLastOperation()
	return last == nil || last.State != gardencorev1beta1.LastOperationStateSucceeded || status.GetObservedGeneration() != o.GetGeneration()
}

// entryGone announces again the bucket of a deleted entry if that bucket is being deleted:
// its deletion waits for its entries to go.
func (b *Bridge) entryGone(e *extensionsv1alpha1.BackupEntry) {
	obj, exists, err := b.buckets.GetStore().GetByKey(e.Spec.BucketName)
	if err != nil || !exists {
		return
	}
	if bucket := obj.(client.Object); bucket.GetDeletionTimestamp() != nil {
		b.enqueue(events.KindBackupBucket, events.OpSynced, bucket, events.WithTrigger("entry-gone/"+string(e.UID)))
	}
}

// watchSecretsOf makes sure the secrets in the namespace of obj's spec.secretRef are watched.
// announceExisting is false for the objects of the initial list (see secretHandler).
func (b *Bridge) watchSecretsOf(obj any, announceExisting bool) {
	if ns := b.secretNamespace(obj); ns != "" {
		b.secrets.watch(ns, announceExisting)
	}
}

func (b *Bridge) enqueue(kind events.Kind, op events.Operation, obj any, opts ...events.ObjectEventOption) {
	o, ok := obj.(client.Object)
	if !ok || !b.filter.handles(o) {
		return
	}
	opts = append(opts, events.WithInputs(b.inputsOf(kind, o)))
	e, err := objectEvent(b.opts.Cluster, kind, op, o, opts...)
	if err != nil {
		b.log.Error("cannot build event", zap.String("kind", string(kind)), zap.String("name", o.GetName()), zap.Error(err))
		return
	}
	key := queueKey(kind, o)
	b.announced.drop(key) // held in its initial list's state: this event is newer
	b.queue.add(key, e)
}

// namespaceAdded announces again the entries whose control-plane namespace just appeared, so
// the entry function writes their etcd-backup secret now.
func (b *Bridge) namespaceAdded(obj any, isInInitialList bool) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || isInInitialList {
		return // at start every entry's inputs, its namespace among them, are compared (release)
	}
	b.announceEntriesIn(ns.Name, "namespace/"+string(ns.UID))
}

// namespaceUpdated announces the namespace's entries again when the shoot it belongs to
// changes (gardener.ShootUIDAnnotation): an entry writes its secret only into its own shoot's
// namespace.
func (b *Bridge) namespaceUpdated(oldObj, newObj any) {
	old, ok := oldObj.(*corev1.Namespace)
	ns, ok2 := newObj.(*corev1.Namespace)
	if !ok || !ok2 || old.Annotations[gardener.ShootUIDAnnotation] == ns.Annotations[gardener.ShootUIDAnnotation] {
		return
	}
	b.announceEntriesIn(ns.Name, "namespace/"+string(ns.UID)+"/"+ns.ResourceVersion)
}

func (b *Bridge) announceEntriesIn(namespace, trigger string) {
	entries, err := b.entries.GetIndexer().ByIndex(byEntryNamespace, namespace)
	if err != nil {
		return
	}
	for _, entry := range entries {
		b.enqueue(events.KindBackupEntry, events.OpSynced, entry, events.WithTrigger(trigger))
	}
}

// Resync announces every handled object again as synced, tagged with trigger so that the
// events are new to JetStream's duplicate window. It returns how many objects it queued.
func (b *Bridge) Resync(trigger string) int {
	n := 0
	informers := b.ownInformers()
	informers[events.KindBackupBucket], informers[events.KindBackupEntry] = b.buckets, b.entries
	for kind, inf := range informers {
		for _, obj := range inf.GetStore().List() {
			if b.filter.handles(obj.(client.Object)) {
				b.enqueue(kind, events.OpSynced, obj, events.WithTrigger("resync/"+trigger))
				n++
			}
		}
	}
	return n
}
