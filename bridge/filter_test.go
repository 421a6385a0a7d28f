package bridge

import (
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
)

func TestRelevantChange(t *testing.T) {
	if azureRotateAnnotation != azure.AnnotationRotate {
		t.Fatalf("the bridge ignores the removal of %q, the provider removes %q", azureRotateAnnotation, azure.AnnotationRotate)
	}
	bucket := func(generation int64, annotations map[string]string) *extensionsv1alpha1.BackupBucket {
		return &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Generation: generation, Annotations: annotations}}
	}
	rotate := map[string]string{azure.AnnotationRotate: "true"}
	reconcile := map[string]string{operationAnnotation: "reconcile"}
	for _, tc := range []struct {
		name     string
		old, cur map[string]string
		gen      int64
		want     bool
	}{
		{"nothing", nil, nil, 1, false},
		{"a new generation", nil, nil, 2, true},
		{"rotation asked", nil, rotate, 1, true},
		{"rotation done: the annotation removed", rotate, nil, 1, false},
		{"reconcile asked", nil, reconcile, 1, true},
		{"reconcile done", reconcile, nil, 1, false},
		{"timestamp bumped", map[string]string{timestampAnnotation: "1"}, map[string]string{timestampAnnotation: "2"}, 1, false},
		{"retention set", nil, map[string]string{"housekeeper.dev/retention": "24h"}, 1, true},
		{"retention removed", map[string]string{"housekeeper.dev/retention": "24h"}, nil, 1, true},
	} {
		if got := relevantChange(bucket(1, tc.old), bucket(tc.gen, tc.cur)); got != tc.want {
			t.Errorf("%s: relevant = %v, want %v", tc.name, got, tc.want)
		}
	}
}
