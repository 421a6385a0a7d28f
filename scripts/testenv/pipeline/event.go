package pipeline

import (
	"encoding/json"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// ObjectEvent is the op event about obj as a publisher in this pipeline's cluster would build
// it: obj's whole JSON as data (the bridge trims it; a test publishing its own has no need to).
func ObjectEvent(kind events.Kind, op events.Operation, obj client.Object, opts ...events.ObjectEventOption) (cloudevents.Event, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return cloudevents.Event{}, err
	}
	return events.NewObjectEvent(Cluster, op, kube.Ref(kind, obj), data, opts...)
}
