package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// secretDigestAnnotation holds, in the bridge's cache only, a digest of a secret's data.
const secretDigestAnnotation = "housekeeper.dev/data-digest"

// secretNamespace is the namespace whose secrets the bridge watches for obj, of kind k: that
// of its spec.secretRef if the bridge handles obj, else none.
func (b *Bridge) secretNamespace(k *kind, obj any) string {
	ref, ok := k.secretRef(obj)
	if !ok || !b.filter.handles(k, obj) {
		return ""
	}
	return ref.Namespace
}

// secretNamespaceInUse says whether a handled object's spec.secretRef is in namespace. It asks
// which namespaces the index holds, as the indexer drops a value with no objects left: asking
// for the namespace's objects would copy and sort thousands of keys for every deletion.
func (b *Bridge) secretNamespaceInUse(namespace string) bool {
	for _, w := range b.watches {
		if inf := w.informer(); inf != nil && slices.Contains(inf.GetIndexer().ListIndexFuncValues(bySecretNamespace), namespace) {
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
	s, ok := as[*corev1.Secret](obj)
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
	return handler[*corev1.Secret]{
		add: func(s *corev1.Secret, isInInitialList bool) {
			if !isInInitialList || announceExisting {
				b.announceSecretUsers(s, waitsForSecret)
			}
		},
		update: b.secretUpdated,
	}.funcs()
}

// secretUpdated announces again the users of a secret whose data changed (a corrected or
// rotated credential); metadata-only updates, such as gardenlet's finalizer patches, do not.
func (b *Bridge) secretUpdated(old, cur *corev1.Secret) {
	if old.Annotations[secretDigestAnnotation] != cur.Annotations[secretDigestAnnotation] {
		b.announceSecretUsers(cur, func(*kind, client.Object) bool { return true })
	}
}

// waitsForSecret reports whether obj, of kind k, found its secret missing
// (gardener.WaitsForSecret): only an extension object reports it.
func waitsForSecret(k *kind, obj client.Object) bool {
	x, ok := k.extension(obj)
	return ok && gardener.WaitsForSecret(x)
}

// secretAppearedWhileWaiting covers the other order of the race an appearing secret runs with
// its user: the user reports the secret missing only after the secret's informer delivered it.
func (b *Bridge) secretAppearedWhileWaiting(k *kind, old, cur client.Object) bool {
	if !waitsForSecret(k, cur) || waitsForSecret(k, old) {
		return false
	}
	ref, _ := k.secretRef(cur)
	return b.secrets.has(ref.Namespace, ref.Name)
}

// announceSecretUsers announces again the objects whose spec.secretRef is s and that need to
// hear of it.
func (b *Bridge) announceSecretUsers(s *corev1.Secret, needs func(*kind, client.Object) bool) {
	key := s.Namespace + "/" + s.Name
	trigger := events.WithTrigger("secret/" + string(s.UID) + "/" + s.ResourceVersion)
	for _, w := range b.watches {
		inf := w.informer()
		if inf == nil {
			continue
		}
		users, _ := inf.GetIndexer().ByIndex(bySecretRef, key)
		for _, o := range listAs[client.Object](users) {
			if (o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) > 0) && needs(w.kind, o) {
				b.enqueue(w.kind, events.OpSynced, o, trigger)
			}
		}
	}
}
