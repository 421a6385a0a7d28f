package etcdbackup

import (
	"context"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC()) }

// updateStatus applies change to the status of the live object at key, read into a
// newObject(), and writes it, re-reading on a conflict: the schedule function and the one a
// schedule fires write different parts of it. An object that is gone needs no status, and a
// change that leaves the status as it was writes nothing (meta.SetStatusCondition keeps a
// condition's transition time when nothing else changed).
func updateStatus[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, newObject func() T, change func(T)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := newObject()
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		before := obj.DeepCopyObject()
		change(obj)
		if apiequality.Semantic.DeepEqual(before, obj) {
			return nil
		}
		return c.Status().Update(ctx, obj)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setCondition sets a condition among conditions, those of an object at generation.
func setCondition(conditions *[]metav1.Condition, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(message, 1024), ObservedGeneration: generation,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
