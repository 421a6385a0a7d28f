package gardener

import (
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOperationTypeFollowsUpstreamOrder(t *testing.T) {
	now := metav1.Now()
	last := func(typ gardencorev1beta1.LastOperationType, state gardencorev1beta1.LastOperationState) *gardencorev1beta1.LastOperation {
		return &gardencorev1beta1.LastOperation{Type: typ, State: state}
	}
	for _, tc := range []struct {
		name       string
		annotation string
		deleting   bool
		last       *gardencorev1beta1.LastOperation
		want       gardencorev1beta1.LastOperationType
	}{
		{"migrate wins over deletion", "migrate", true, nil, gardencorev1beta1.LastOperationTypeMigrate},
		{"deletion wins over restore", "restore", true, nil, gardencorev1beta1.LastOperationTypeDelete},
		{"restore", "restore", false, last("Reconcile", "Succeeded"), gardencorev1beta1.LastOperationTypeRestore},
		{"first time", "", false, nil, gardencorev1beta1.LastOperationTypeCreate},
		{"unfinished create", "", false, last("Create", "Error"), gardencorev1beta1.LastOperationTypeCreate},
		{"unfinished restore", "", false, last("Restore", "Processing"), gardencorev1beta1.LastOperationTypeRestore},
		{"after create", "reconcile", false, last("Create", "Succeeded"), gardencorev1beta1.LastOperationTypeReconcile},
		{"failed reconcile", "", false, last("Reconcile", "Error"), gardencorev1beta1.LastOperationTypeReconcile},
	} {
		b := &extensionsv1alpha1.BackupBucket{}
		if tc.annotation != "" {
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, AnnotationOperation, tc.annotation)
		}
		if tc.deleting {
			b.DeletionTimestamp = &now
		}
		b.Status.LastOperation = tc.last
		if got := OperationType(b); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestStatusWritesAsUpstream(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	b := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	setError(b, "Create", gardencorev1beta1.LastOperationStateError, "boom", []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthenticated}, "", now)
	if op := b.Status.LastOperation; op.Progress != 50 || op.State != "Error" || b.Status.LastError.Description != "boom" || b.Status.ObservedGeneration != 3 {
		t.Errorf("error status %+v %+v", op, b.Status.LastError)
	}
	setSucceeded(b, "Create", "done", now)
	if op := b.Status.LastOperation; op.Progress != 100 || op.State != "Succeeded" || b.Status.LastError != nil || !op.LastUpdateTime.Time.Equal(now) {
		t.Errorf("succeeded status %+v, lastError %+v", op, b.Status.LastError)
	}
}
