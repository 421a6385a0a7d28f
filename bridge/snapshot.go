package bridge

import (
	"encoding/json"
	"fmt"
	"maps"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Snapshot is the trimmed JSON of obj used as event data: no managedFields, no
// last-applied-configuration; if that is still above events.MaxDataSize, without status,
// providerConfig and backupBucketProviderStatus too; if still above, events.ErrDataTooLarge.
func Snapshot(kind events.Kind, obj client.Object) ([]byte, error) {
	k := kindOf(kind)
	if k == nil {
		return nil, fmt.Errorf("snapshot of %s %s: the bridge watches no such kind", kind, obj.GetName())
	}
	data, err := k.marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s %s: %w", kind, obj.GetName(), err)
	}
	if len(data) <= events.MaxDataSize {
		return data, nil
	}
	// Rare: a generic pass over the JSON drops the large optional parts.
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok {
		delete(spec, "providerConfig")
		delete(spec, "backupBucketProviderStatus")
	}
	if data, err = json.Marshal(m); err != nil || len(data) <= events.MaxDataSize {
		return data, err
	}
	return nil, fmt.Errorf("%w: %s %s is %d bytes trimmed, limit %d", events.ErrDataTooLarge, kind, obj.GetName(), len(data), events.MaxDataSize)
}

// trimmed marshals an object of Go type P with apiVersion and kind gvk, without managedFields
// and last-applied-configuration: as a shallow copy, since the object is often an informer's
// cached object, shared and never to be modified. An object of another type takes a generic
// pass over its JSON.
func trimmed[T any, P interface {
	*T
	client.Object
}](gvk schema.GroupVersionKind) func(obj any) ([]byte, error) {
	return func(obj any) ([]byte, error) {
		o, ok := as[P](obj)
		if !ok {
			return marshalUntyped(obj, gvk)
		}
		c := *o
		trim := P(&c)
		trim.GetObjectKind().SetGroupVersionKind(gvk)
		trim.SetManagedFields(nil)
		if a := trim.GetAnnotations(); a != nil {
			if _, ok := a[lastAppliedAnnotation]; ok {
				a = maps.Clone(a)
				delete(a, lastAppliedAnnotation)
				trim.SetAnnotations(a)
			}
		}
		return json.Marshal(trim)
	}
}

// marshalUntyped is trimmed's pass over the JSON of an object it has no type for.
func marshalUntyped(obj any, gvk schema.GroupVersionKind) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.ToAPIVersionAndKind()
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, lastAppliedAnnotation)
		}
	}
	return json.Marshal(m)
}

// objectEvent is the event for op on obj, a kind of object seen in cluster, with its snapshot
// as data.
func objectEvent(cluster string, kind events.Kind, op events.Operation, obj client.Object, opts ...events.ObjectEventOption) (cloudevents.Event, error) {
	data, err := Snapshot(kind, obj)
	if err != nil {
		return cloudevents.Event{}, err
	}
	return events.NewObjectEvent(cluster, op, kube.Ref(kind, obj), data, opts...)
}
