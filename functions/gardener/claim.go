package gardener

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
)

// claim adds our finalizer to the object the event announces as new, if the event's copy says
// that is what the live object needs: not being deleted, without our finalizer, no
// lastOperation (so not migrated away), no operation annotation other than reconcile or
// restore. The write is a JSON patch whose test operations prove each of those fields and the
// uid and resourceVersion on the live object, so a forged or outdated copy changes nothing;
// a reconcile annotation goes in the same write, as upstream removes it before the work. It
// returns the live object the server answers with and the operation it asked for, or not ok
// when the copy does not qualify or its proof failed: then the object is read.
func (r *Reconciler[T]) claim(ctx context.Context, e cloudevents.Event, ref events.Ref) (live T, operation string, ok bool, err error) {
	copied := r.NewObject()
	if err := json.Unmarshal(e.Data(), copied); err != nil || copied.GetName() != ref.Name || copied.GetUID() == "" || copied.GetResourceVersion() == "" {
		return live, "", false, nil
	}
	operation = copied.GetAnnotations()[AnnotationOperation]
	// The claim proves the resourceVersion, so the copy's type and class are the live object's.
	if !r.Scope.Serves(copied) || copied.GetDeletionTimestamp() != nil || controllerutil.ContainsFinalizer(copied, r.Finalizer) ||
		copied.GetExtensionStatus().GetLastOperation() != nil ||
		(operation != "" && operation != OperationReconcile && operation != OperationRestore) {
		return live, "", false, nil
	}
	patch, err := claimPatch(copied, r.Finalizer)
	if err != nil {
		return live, "", false, err
	}
	// The answer goes into an empty object: decoding into the copy would keep what the copy
	// has and the live object lacks.
	live = r.NewObject()
	live.SetName(ref.Name)
	err = r.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case err == nil:
		return live, operation, true, nil
	case apierrors.IsInvalid(err), apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		// The copy is not the live object (outdated or forged), or the object is gone.
		r.Log.Debug("the event's copy is not the live object: reading it", zap.String("name", ref.Name), zap.Error(err))
		return live, "", false, nil
	default:
		return live, "", false, fmt.Errorf("adding finalizer to %s %s: %w", r.Kind, ref.Name, err)
	}
}

// claimPatch is the JSON patch (RFC 6902) that adds finalizer to obj, and drops a reconcile
// annotation, only if the live object still has obj's uid, resourceVersion, finalizers and
// operation annotation and has no deletionTimestamp and no status. A test of a missing member
// against null passes, of any other value fails.
func claimPatch(obj extensionsv1alpha1.Object, finalizer string) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var finalizers any // null: no finalizers
	if f := obj.GetFinalizers(); len(f) > 0 {
		finalizers = f
	}
	ops := []op{
		{"test", "/metadata/uid", obj.GetUID()},
		{"test", "/metadata/resourceVersion", obj.GetResourceVersion()},
		{"test", "/metadata/deletionTimestamp", nil},
		{"test", "/status", nil},
		{"test", "/metadata/finalizers", finalizers},
	}
	switch operation, annotated := obj.GetAnnotations()[AnnotationOperation]; {
	case obj.GetAnnotations() == nil:
		ops = append(ops, op{"test", "/metadata/annotations", nil})
	case !annotated:
		ops = append(ops, op{"test", annotationPath, nil})
	case operation == OperationReconcile:
		ops = append(ops, op{"test", annotationPath, operation}, op{Op: "remove", Path: annotationPath})
	default:
		ops = append(ops, op{"test", annotationPath, operation})
	}
	ops = append(ops, op{"add", "/metadata/finalizers", append(slices.Clone(obj.GetFinalizers()), finalizer)})
	return json.Marshal(ops)
}

// annotationPath is the JSON pointer (RFC 6901) to the operation annotation.
var annotationPath = "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(AnnotationOperation)
