package kube

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Ref is how events name obj, a kind of object: by name (namespace/name if namespaced), uid,
// resourceVersion and generation.
func Ref(kind events.Kind, obj client.Object) events.Ref {
	return events.Ref{
		Kind:            kind,
		Name:            events.ObjectName(obj.GetNamespace(), obj.GetName()),
		UID:             string(obj.GetUID()),
		ResourceVersion: obj.GetResourceVersion(),
		Generation:      obj.GetGeneration(),
	}
}
