package bridge

import (
	"encoding/json"
	"fmt"
	"maps"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

const apiVersion = "extensions.gardener.cloud/v1alpha1"

// Snapshot is the trimmed JSON of obj used as event data: no managedFields, no
// last-applied-configuration; if that is still above events.MaxDataSize, without status,
// providerConfig and backupBucketProviderStatus too; if still above, events.ErrDataTooLarge.
func Snapshot(kind events.Kind, obj client.Object) ([]byte, error) {
	data, err := marshalTrimmed(kind, obj)
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

// marshalTrimmed marshals obj with apiVersion and kind and without managedFields and
// last-applied-configuration. The kinds the bridge watches are marshalled once, as a
// shallow copy: obj is often an informer's cached object, shared and never to be modified.
func marshalTrimmed(kind events.Kind, obj client.Object) ([]byte, error) {
	tm := metav1.TypeMeta{APIVersion: apiVersion, Kind: string(kind)}
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupEntry:
		c := *o
		c.TypeMeta = tm
		trimMeta(&c.ObjectMeta)
		return json.Marshal(&c)
	case *extensionsv1alpha1.BackupBucket:
		c := *o
		c.TypeMeta = tm
		trimMeta(&c.ObjectMeta)
		return json.Marshal(&c)
	case *backupv1alpha1.EtcdBackupConfig:
		c := *o
		c.TypeMeta = metav1.TypeMeta{APIVersion: backupv1alpha1.SchemeGroupVersion.String(), Kind: string(kind)}
		trimMeta(&c.ObjectMeta)
		return json.Marshal(&c)
	case *backupv1alpha1.RestoreDrill:
		c := *o
		c.TypeMeta = metav1.TypeMeta{APIVersion: backupv1alpha1.SchemeGroupVersion.String(), Kind: string(kind)}
		trimMeta(&c.ObjectMeta)
		return json.Marshal(&c)
	case *backupv1alpha1.BackupCopyPolicy:
		c := *o
		c.TypeMeta = metav1.TypeMeta{APIVersion: backupv1alpha1.SchemeGroupVersion.String(), Kind: string(kind)}
		trimMeta(&c.ObjectMeta)
		return json.Marshal(&c)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = tm.APIVersion, tm.Kind
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, lastAppliedAnnotation)
		}
	}
	return json.Marshal(m)
}

// trimMeta drops managedFields and last-applied-configuration from a shallow copy's metadata,
// copying the annotations before changing them.
func trimMeta(meta *metav1.ObjectMeta) {
	meta.ManagedFields = nil
	if _, ok := meta.Annotations[lastAppliedAnnotation]; ok {
		meta.Annotations = maps.Clone(meta.Annotations)
		delete(meta.Annotations, lastAppliedAnnotation)
	}
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
