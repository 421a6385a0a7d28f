package entry

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

func TestCachedMetadataKeepsOnlyWhatTheFunctionReads(t *testing.T) {
	deleting := metav1.NewTime(time.Unix(1700000000, 0))
	ns := metadataOf("Namespace")
	ns.ObjectMeta = metav1.ObjectMeta{
		Name: "shoot--dev--app", UID: "ns-uid", ResourceVersion: "42", DeletionTimestamp: &deleting,
		Labels:          map[string]string{"gardener.cloud/role": "shoot", "shoot.gardener.cloud/provider": "local"},
		Annotations:     map[string]string{gardener.ShootUIDAnnotation: "shoot-uid", "shoot.gardener.cloud/status": "healthy", AnnotationCreatedBy: "entry"},
		Finalizers:      []string{"kubernetes"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "gardenlet"}},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
	}
	got, err := cachedMetadata(ns)
	if err != nil {
		t.Fatal(err)
	}
	kept := got.(*metav1.PartialObjectMetadata)
	want := metav1.ObjectMeta{Name: "shoot--dev--app", UID: "ns-uid", ResourceVersion: "42", DeletionTimestamp: &deleting,
		Annotations: map[string]string{gardener.ShootUIDAnnotation: "shoot-uid", AnnotationCreatedBy: "entry"}}
	if kept.Name != want.Name || kept.UID != want.UID || kept.ResourceVersion != want.ResourceVersion || !kept.DeletionTimestamp.Equal(want.DeletionTimestamp) ||
		!maps.Equal(kept.Annotations, want.Annotations) || kept.Labels != nil || kept.Finalizers != nil || kept.ManagedFields != nil || kept.OwnerReferences != nil {
		t.Errorf("cached metadata %+v, want only %+v", kept.ObjectMeta, want)
	}
	if kept.Kind != "Namespace" {
		t.Errorf("cached kind %q, want Namespace", kept.Kind)
	}

	secret := metadataOf("Secret")
	secret.ObjectMeta = metav1.ObjectMeta{Namespace: "shoot--dev--app", Name: SecretName, UID: "s-uid", Labels: map[string]string{"a": "b"}}
	got, _ = cachedMetadata(secret)
	if s := got.(*metav1.PartialObjectMetadata); s.Namespace != secret.Namespace || s.Name != SecretName || s.UID != "s-uid" || s.Annotations != nil || s.Labels != nil {
		t.Errorf("cached secret metadata %+v", s.ObjectMeta)
	}

	// Anything else (client-go's tombstones) passes as it is.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"}}}
	if got, _ := cachedMetadata(other); got != any(other) {
		t.Errorf("cachedMetadata changed a %T", other)
	}
}
