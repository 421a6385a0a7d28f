package bridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

func snapshotMap(t *testing.T, entry *extensionsv1alpha1.BackupEntry) map[string]any {
	t.Helper()
	data, err := Snapshot(events.KindBackupEntry, entry)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > events.MaxDataSize {
		t.Errorf("snapshot is %d bytes, above events.MaxDataSize %d", len(data), events.MaxDataSize)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func path(m map[string]any, keys ...string) (any, bool) {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func TestSnapshotTrims(t *testing.T) {
	entry := testEntry()
	m := snapshotMap(t, entry)

	if _, ok := path(m, "metadata", "managedFields"); ok {
		t.Error("managedFields kept")
	}
	if _, ok := path(m, "metadata", "annotations", lastAppliedAnnotation); ok {
		t.Error("last-applied-configuration kept")
	}
	for _, keep := range [][]string{
		{"metadata", "annotations", "gardener.cloud/operation"},
		{"metadata", "annotations", "shoot.gardener.cloud/purpose"},
		{"metadata", "labels", "name"},
		{"metadata", "uid"},
		{"metadata", "resourceVersion"},
		{"metadata", "generation"},
		{"metadata", "finalizers"},
		{"spec", "bucketName"},
		{"spec", "providerConfig"}, // small objects keep it
		{"status", "observedGeneration"},
	} {
		if _, ok := path(m, keep...); !ok {
			t.Errorf("%s dropped", strings.Join(keep, "."))
		}
	}
	if m["apiVersion"] != "extensions.gardener.cloud/v1alpha1" || m["kind"] != "BackupEntry" {
		t.Errorf("apiVersion/kind = %v/%v", m["apiVersion"], m["kind"])
	}
	// The object itself is untouched.
	if len(entry.ManagedFields) != 1 || entry.Annotations[lastAppliedAnnotation] == "" {
		t.Error("Snapshot modified the object")
	}
}

func TestSnapshotBucket(t *testing.T) {
	data, err := Snapshot(events.KindBackupBucket, testBucketObj())
	if err != nil {
		t.Fatal(err)
	}
	var b extensionsv1alpha1.BackupBucket
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	if b.Kind != "BackupBucket" || b.APIVersion != "extensions.gardener.cloud/v1alpha1" || b.Spec.Region != "westeurope" ||
		len(b.ManagedFields) != 0 || b.Annotations[lastAppliedAnnotation] != "" ||
		b.Annotations["backupbucket.extensions.gardener.cloud/generated-secret-namespace"] != "garden" {
		t.Errorf("snapshot %s", data)
	}
}

// housekeeper's own kinds are snapshotted with their own apiVersion, trimmed like the others,
// and the informer's object they are taken from stays as it was.
func TestSnapshotOwnKinds(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "weekly", UID: "u1", ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Annotations:   map[string]string{lastAppliedAnnotation: "{}", "keep": "me"}}
	}
	config := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: meta(), Spec: backupv1alpha1.EtcdBackupConfigSpec{Schedule: "@daily"}}
	config.Namespace = "team"
	drill := &backupv1alpha1.RestoreDrill{ObjectMeta: meta(), Spec: backupv1alpha1.RestoreDrillSpec{Schedule: "@daily", All: true}}
	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: meta(), Spec: backupv1alpha1.BackupCopyPolicySpec{Schedule: "@daily", Destination: "s3-eu"}}
	for _, tc := range []struct {
		kind events.Kind
		obj  client.Object
	}{{events.KindEtcdBackupConfig, config}, {events.KindRestoreDrill, drill}, {events.KindBackupCopyPolicy, policy}} {
		data, err := Snapshot(tc.kind, tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Schedule string `json:"schedule"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Kind != string(tc.kind) || got.APIVersion != "backup.housekeeper.dev/v1alpha1" || got.Spec.Schedule != "@daily" ||
			len(got.Metadata.ManagedFields) != 0 || got.Metadata.Annotations[lastAppliedAnnotation] != "" || got.Metadata.Annotations["keep"] != "me" {
			t.Errorf("%s snapshot %s", tc.kind, data)
		}
		if len(tc.obj.GetManagedFields()) != 1 || tc.obj.GetAnnotations()[lastAppliedAnnotation] == "" {
			t.Errorf("the snapshot of the %s changed the object it was taken from", tc.kind)
		}
	}
}

func bigJSON(n int) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: []byte(`{"blob":"` + strings.Repeat("x", n) + `"}`)}
}

// Too large with status and providerConfig: both go, the rest stays.
func TestSnapshotFallbackDropsStatusAndProviderConfig(t *testing.T) {
	for name, grow := range map[string]func(*extensionsv1alpha1.BackupEntry){
		"large status": func(e *extensionsv1alpha1.BackupEntry) {
			e.Status.ProviderStatus = bigJSON(events.MaxDataSize)
			e.Status.LastError = &gardencorev1beta1.LastError{Description: strings.Repeat("boom ", 1000)}
		},
		"large providerConfig": func(e *extensionsv1alpha1.BackupEntry) {
			e.Spec.ProviderConfig = bigJSON(events.MaxDataSize)
		},
	} {
		t.Run(name, func(t *testing.T) {
			entry := testEntry()
			grow(entry)
			m := snapshotMap(t, entry)
			if _, ok := m["status"]; ok {
				t.Error("status kept")
			}
			if _, ok := path(m, "spec", "providerConfig"); ok {
				t.Error("spec.providerConfig kept")
			}
			for _, keep := range [][]string{{"spec", "bucketName"}, {"spec", "region"}, {"spec", "secretRef", "name"}, {"metadata", "uid"}, {"metadata", "annotations", "gardener.cloud/operation"}} {
				if _, ok := path(m, keep...); !ok {
					t.Errorf("%s dropped", strings.Join(keep, "."))
				}
			}
			if _, ok := path(m, "metadata", "managedFields"); ok {
				t.Error("managedFields kept")
			}
		})
	}
}

// Exactly events.MaxDataSize bytes is small enough; one byte more triggers the fallback.
func TestSnapshotLimitIsInclusive(t *testing.T) {
	size := func(pad int) (map[string]any, int) {
		e := testEntry()
		e.Annotations["pad"] = strings.Repeat("x", pad)
		data, err := Snapshot(events.KindBackupEntry, e)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m, len(data)
	}
	_, base := size(0)
	m, n := size(events.MaxDataSize - base)
	if n != events.MaxDataSize {
		t.Fatalf("padded snapshot is %d bytes, want %d", n, events.MaxDataSize)
	}
	if _, ok := m["status"]; !ok {
		t.Error("a snapshot of exactly events.MaxDataSize bytes lost its status")
	}
	m, n = size(events.MaxDataSize - base + 1)
	if _, ok := m["status"]; ok || n > events.MaxDataSize {
		t.Errorf("a snapshot one byte over the limit kept its status (%d bytes)", n)
	}
}

// When the object is too large without status, providerConfig and backupBucketProviderStatus,
// there is no event.
func TestSnapshotTooLarge(t *testing.T) {
	for name, grow := range map[string]func(*extensionsv1alpha1.BackupEntry){
		"spec":   func(e *extensionsv1alpha1.BackupEntry) { e.Spec.BucketName = strings.Repeat("b", events.MaxDataSize) },
		"region": func(e *extensionsv1alpha1.BackupEntry) { e.Spec.Region = strings.Repeat("r", events.MaxDataSize) },
		"annotations": func(e *extensionsv1alpha1.BackupEntry) {
			e.Annotations["big"] = strings.Repeat("a", events.MaxDataSize)
		},
	} {
		t.Run(name, func(t *testing.T) {
			entry := testEntry()
			grow(entry)
			data, err := Snapshot(events.KindBackupEntry, entry)
			if !errors.Is(err, events.ErrDataTooLarge) {
				t.Fatalf("Snapshot = %d bytes, %v; want events.ErrDataTooLarge", len(data), err)
			}
			if data != nil {
				t.Errorf("Snapshot returned %d bytes with its error", len(data))
			}
			if !strings.Contains(err.Error(), testEntryName) {
				t.Errorf("error %q does not name the object", err)
			}
			if _, err := objectEvent("garden-eu1", events.KindBackupEntry, events.OpUpdated, entry); !errors.Is(err, events.ErrDataTooLarge) {
				t.Errorf("objectEvent = %v, want events.ErrDataTooLarge", err)
			}
		})
	}
}

// Fixtures of the snapshot tests.

const (
	testEntryName = "shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c"
	testEntryUID  = "5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c"
	testBucket    = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
	testBucketUID = "9e8d7c6b-5a49-4382-a716-2b3c4d5e6f70"
)

var testManagedFields = []metav1.ManagedFieldsEntry{{
	Manager:    "gardenlet",
	Operation:  metav1.ManagedFieldsOperationUpdate,
	APIVersion: "extensions.gardener.cloud/v1alpha1",
	FieldsType: "FieldsV1",
	FieldsV1:   metav1.NewFieldsV1(`{"f:spec":{"f:bucketName":{},"f:region":{}}}`),
}}

func testEntry() *extensionsv1alpha1.BackupEntry {
	class := extensionsv1alpha1.ExtensionClassSeed
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testEntryName,
			UID:             testEntryUID,
			ResourceVersion: "48213",
			Generation:      3,
			Annotations: map[string]string{
				lastAppliedAnnotation:                   `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"BackupEntry"}`,
				"gardener.cloud/operation":              "reconcile",
				"shoot.gardener.cloud/purpose":          "evaluation",
				"backup.housekeeper.dev/retention-days": "7",
			},
			Labels:        map[string]string{"name": "app"},
			Finalizers:    []string{"extensions.gardener.cloud/housekeeper"},
			ManagedFields: testManagedFields,
		},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{
				Type:           "azure",
				Class:          &class,
				ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupConfig"}`)},
			},
			Region:     "westeurope",
			BucketName: testBucket,
			SecretRef:  corev1.SecretReference{Name: "entry-" + testEntryName, Namespace: "garden"},
		},
		Status: extensionsv1alpha1.BackupEntryStatus{
			DefaultStatus: extensionsv1alpha1.DefaultStatus{ObservedGeneration: 3},
		},
	}
}

func testBucketObj() *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testBucket,
			UID:             testBucketUID,
			ResourceVersion: "1007",
			Generation:      1,
			Annotations: map[string]string{
				lastAppliedAnnotation: `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"BackupBucket"}`,
				"backupbucket.extensions.gardener.cloud/generated-secret-namespace": "garden",
			},
			ManagedFields: testManagedFields,
		},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"},
			Region:      "westeurope",
			SecretRef:   corev1.SecretReference{Name: "backupprovider", Namespace: "garden"},
		},
	}
}

// The data unmarshals back into the Gardener type with its spec intact.
func TestObjectEventDataIsTheObject(t *testing.T) {
	entry := testEntry()
	e, err := objectEvent("garden-eu1", events.KindBackupEntry, events.OpUpdated, entry)
	if err != nil {
		t.Fatal(err)
	}
	var got extensionsv1alpha1.BackupEntry
	if err := e.DataAs(&got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.BucketName != testBucket || got.Spec.Region != "westeurope" || got.Spec.SecretRef != entry.Spec.SecretRef {
		t.Errorf("spec = %+v", got.Spec)
	}
	if got.Annotations["gardener.cloud/operation"] != "reconcile" {
		t.Errorf("annotations = %v, want the non-kubectl ones kept", got.Annotations)
	}
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("status.observedGeneration = %d, want 3", got.Status.ObservedGeneration)
	}
}
