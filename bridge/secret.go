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

func secretRefIndex(obj any) ([]string, error) {
	var ref corev1.SecretReference
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupBucket:
		ref = o.Spec.SecretRef
	case *extensionsv1alpha1.BackupEntry:
		ref = o.Spec.SecretRef
	}
	return []string{ref.Namespace + "/" + ref.Name}, nil
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

// secretAdded announces again the objects whose spec.secretRef just appeared, so that a
// bucket or entry waiting for its credentials proceeds.
func (b *Bridge) secretAdded(obj any, isInInitialList bool) {
	if !isInInitialList {
		b.announceSecretUsers(obj.(*corev1.Secret))
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
