package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
)

// secretDigestAnnotation holds, in the bridge's cache only, a digest of a secret's data.
const secretDigestAnnotation = "housekeeper.dev/data-digest"

// secretRef is the spec.secretRef of a BackupBucket or BackupEntry.
func secretRef(obj any) (corev1.SecretReference, bool) {
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupBucket:
		return o.Spec.SecretRef, true
	case *extensionsv1alpha1.BackupEntry:
		return o.Spec.SecretRef, true
	}
	return corev1.SecretReference{}, false
}

func secretRefIndex(obj any) ([]string, error) {
	ref, _ := secretRef(obj)
	return []string{ref.Namespace + "/" + ref.Name}, nil
}

// secretNamespace is the namespace whose secrets the bridge watches for obj: that of its
// spec.secretRef if the bridge handles obj, else none.
func (b *Bridge) secretNamespace(obj any) string {
	ref, ok := secretRef(obj)
	if o, isObject := obj.(client.Object); !ok || !isObject || !b.filter.handles(o) {
		return ""
	}
	return ref.Namespace
}

// secretNamespaceIndex indexes handled objects by secretNamespace.
func (b *Bridge) secretNamespaceIndex(obj any) ([]string, error) {
	if ns := b.secretNamespace(obj); ns != "" {
		return []string{ns}, nil
	}
	return nil, nil
}

// secretUsers counts the handled objects whose spec.secretRef is in namespace.
func (b *Bridge) secretUsers(namespace string) int {
	n := 0
	for _, inf := range []cache.SharedIndexInformer{b.buckets, b.entries} {
		keys, _ := inf.GetIndexer().IndexKeys(bySecretNamespace, namespace)
		n += len(keys)
	}
	return n
}

// digestSecret replaces a secret's data with a digest of it before the informer caches it:
// the bridge must notice a changed credential but never hold one.
func digestSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	h := sha256.New()
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(s.Data[k])
		h.Write([]byte{0})
	}
	trimmed := &corev1.Secret{ObjectMeta: *s.ObjectMeta.DeepCopy(), Type: s.Type}
	trimmed.ManagedFields = nil
	if trimmed.Annotations == nil {
		trimmed.Annotations = map[string]string{}
	}
	trimmed.Annotations[secretDigestAnnotation] = hex.EncodeToString(h.Sum(nil))
	return trimmed, nil
}

// secretHandler handles the secrets of a namespace. A secret that appears announces again the
// objects whose spec.secretRef it is, so that a bucket or entry waiting for its credentials
// proceeds. The initial list is announced only by an informer started for a namespace an
// object referenced after the bridge's own initial list (announceExisting): at start every
// object is announced anyway, but a secret created while the new informer listed would
// otherwise never announce the object that waits for it.
func (b *Bridge) secretHandler(announceExisting bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if s, ok := obj.(*corev1.Secret); ok && (!isInInitialList || announceExisting) {
				b.announceSecretUsers(s)
			}
		},
		UpdateFunc: b.secretUpdated,
	}
}

// secretUpdated announces again the users of a secret whose data changed (a corrected or
// rotated credential); metadata-only updates, such as gardenlet's finalizer patches, do not.
func (b *Bridge) secretUpdated(oldObj, newObj any) {
	old, cur := oldObj.(*corev1.Secret), newObj.(*corev1.Secret)
	if old.Annotations[secretDigestAnnotation] != cur.Annotations[secretDigestAnnotation] {
		b.announceSecretUsers(cur)
	}
}

func (b *Bridge) announceSecretUsers(s *corev1.Secret) {
	key := s.Namespace + "/" + s.Name
	trigger := events.WithTrigger("secret/" + string(s.UID) + "/" + s.ResourceVersion)
	for kind, inf := range map[events.Kind]cache.SharedIndexInformer{events.KindBackupBucket: b.buckets, events.KindBackupEntry: b.entries} {
		users, _ := inf.GetIndexer().ByIndex(bySecretRef, key)
		for _, u := range users {
			if o := u.(client.Object); o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) > 0 {
				b.enqueue(kind, events.OpSynced, u, trigger)
			}
		}
	}
}
