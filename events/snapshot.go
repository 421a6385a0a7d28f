package events

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxDataSize caps an event's data. Events are triggers; consumers re-read the object, so a
// snapshot only has to be good enough to filter and audit by.
const MaxDataSize = 32 << 10

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Snapshot is the trimmed JSON of obj used as event data: no managedFields, no
// last-applied-configuration; if that is still above MaxDataSize, without status,
// providerConfig and backupBucketProviderStatus too; if still above, ErrDataTooLarge.
func Snapshot(kind Kind, obj client.Object) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s %s: %w", kind, obj.GetName(), err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["apiVersion"] = "extensions.gardener.cloud/v1alpha1"
	m["kind"] = string(kind)
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, lastAppliedAnnotation)
		}
	}
	data, err := json.Marshal(m)
	if err != nil || len(data) <= MaxDataSize {
		return data, err
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok {
		delete(spec, "providerConfig")
		delete(spec, "backupBucketProviderStatus")
	}
	if data, err = json.Marshal(m); err != nil || len(data) <= MaxDataSize {
		return data, err
	}
	return nil, fmt.Errorf("%w: %s %s is %d bytes trimmed, limit %d", ErrDataTooLarge, kind, obj.GetName(), len(data), MaxDataSize)
}
