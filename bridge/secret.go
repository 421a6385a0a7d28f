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
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
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

// secretNamespaceInUse says whether a handled object's spec.secretRef is in namespace. It asks
// which namespaces the index holds, as the indexer drops a value with no objects left: asking
// for the namespace's objects would copy and sort thousands of keys for every deletion.
func (b *Bridge) secretNamespaceInUse(namespace string) bool {
	for _, inf := range []cache.SharedIndexInformer{b.buckets, b.entries} {
		if slices.Contains(inf.GetIndexer().ListIndexFuncValues(bySecretNamespace), namespace) {
			return true
		}
	}
	return false
}

// digestSecret replaces a secret's data with a digest of it before the informer caches it:
// the bridge must notice a changed credential but never hold one.
// It must be idempotent: client-go may hand it an object it transformed already (a listed
// object passes it twice), whose digest must not become that of no data at all.
func digestSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	if _, digested := s.Annotations[secretDigestAnnotation]; digested && s.Data == nil && s.StringData == nil {
		return s, nil
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
// objects that found it missing (gardener.WaitsForSecret), so that they proceed; an object
// that has not tried yet finds the secret itself, so gardenlet's usual order — the secret,
// then the object — costs no second event. The initial list is announced only by an informer
// started for a namespace an object referenced after the bridge's own initial list
// (announceExisting): at start every object's inputs, its secret's digest among them, are
// compared with its last event's once the secrets are listed (release).
func (b *Bridge) secretHandler(announceExisting bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if s, ok := obj.(*corev1.Secret); ok && (!isInInitialList || announceExisting) {
				b.announceSecretUsers(s, gardener.WaitsForSecret)
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
		b.announceSecretUsers(cur, func(extensionsv1alpha1.Object) bool { return true })
	}
}

// secretAppearedWhileWaiting covers the other order of the race an appearing secret runs with
// its user: the user reports the secret missing only after the secret's informer delivered it.
func (b *Bridge) secretAppearedWhileWaiting(old, cur client.Object) bool {
	was, wasObject := old.(extensionsv1alpha1.Object)
	is, isObject := cur.(extensionsv1alpha1.Object)
	if !wasObject || !isObject || !gardener.WaitsForSecret(is) || gardener.WaitsForSecret(was) {
		return false
	}
	ref, _ := secretRef(cur)
	return b.secrets.has(ref.Namespace, ref.Name)
}

// announceSecretUsers announces again the objects whose spec.secretRef is s and that need to
// hear of it.
func (b *Bridge) announceSecretUsers(s *corev1.Secret, needs func(extensionsv1alpha1.Object) bool) {
	key := s.Namespace + "/" + s.Name
	trigger := events.WithTrigger("secret/" + string(s.UID) + "/" + s.ResourceVersion)
	for kind, inf := range map[events.Kind]cache.SharedIndexInformer{events.KindBackupBucket: b.buckets, events.KindBackupEntry: b.entries} {
		users, _ := inf.GetIndexer().ByIndex(bySecretRef, key)
		for _, u := range users {
			o := u.(extensionsv1alpha1.Object)
			if (o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) > 0) && needs(o) {
				b.enqueue(kind, events.OpSynced, u, trigger)
			}
		}
	}
}
