package kube

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

// UpdateStatus applies change to the status of the live object at key, read into a
// newObject(), and writes it, re-reading on a conflict: the function a schedule fires and the
// one that installs the schedule write different parts of it. An object that is gone needs no
// status, and a change that leaves the status as it was writes nothing (SetCondition keeps a
// condition's transition time when nothing else changed).
func UpdateStatus[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, newObject func() T, change func(T)) error {
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

// maxConditionMessage is the longest condition message written, in characters (the API
// allows 32768 bytes; a status is read by people).
const maxConditionMessage = 1024

// SetCondition sets the condition typ among conditions, those of an object at generation:
// True when ok, with reason and message (cut at maxConditionMessage).
func SetCondition(conditions *[]metav1.Condition, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: Truncate(message, maxConditionMessage), ObservedGeneration: generation,
	})
}

// Truncate cuts s to at most n characters (the API's maxLength counts characters, and a cut
// inside a character would not be UTF-8), marking the cut with an ellipsis.
func Truncate(s string, n int) string {
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return string(runes[:n-1]) + "…"
}

// Time is t as a status records it: in UTC, so that what is read back compares equal.
func Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC()) }

// SetNextRun sets a status's nextRun to next, unless next is zero: a fire that does not say when
// its schedule fires next (a retry, a one-off, a run on demand) leaves it as it is.
func SetNextRun(nextRun **metav1.Time, next time.Time) {
	if !next.IsZero() {
		t := Time(next)
		*nextRun = &t
	}
}
