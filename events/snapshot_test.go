package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
)

func snapshotMap(t *testing.T, entry *extensionsv1alpha1.BackupEntry) map[string]any {
	t.Helper()
	data, err := Snapshot(KindBackupEntry, entry)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxDataSize {
		t.Errorf("snapshot is %d bytes, above MaxDataSize %d", len(data), MaxDataSize)
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
	data, err := Snapshot(KindBackupBucket, testBucketObj())
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

func bigJSON(n int) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: []byte(`{"blob":"` + strings.Repeat("x", n) + `"}`)}
}

// Too large with status and providerConfig: both go, the rest stays.
func TestSnapshotFallbackDropsStatusAndProviderConfig(t *testing.T) {
	for name, grow := range map[string]func(*extensionsv1alpha1.BackupEntry){
		"large status": func(e *extensionsv1alpha1.BackupEntry) {
			e.Status.ProviderStatus = bigJSON(MaxDataSize)
			e.Status.LastError = &gardencorev1beta1.LastError{Description: strings.Repeat("boom ", 1000)}
		},
		"large providerConfig": func(e *extensionsv1alpha1.BackupEntry) {
			e.Spec.ProviderConfig = bigJSON(MaxDataSize)
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

// Exactly MaxDataSize bytes is small enough; one byte more triggers the fallback.
func TestSnapshotLimitIsInclusive(t *testing.T) {
	size := func(pad int) (map[string]any, int) {
		e := testEntry()
		e.Annotations["pad"] = strings.Repeat("x", pad)
		data, err := Snapshot(KindBackupEntry, e)
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
	m, n := size(MaxDataSize - base)
	if n != MaxDataSize {
		t.Fatalf("padded snapshot is %d bytes, want %d", n, MaxDataSize)
	}
	if _, ok := m["status"]; !ok {
		t.Error("a snapshot of exactly MaxDataSize bytes lost its status")
	}
	m, n = size(MaxDataSize - base + 1)
	if _, ok := m["status"]; ok || n > MaxDataSize {
		t.Errorf("a snapshot one byte over the limit kept its status (%d bytes)", n)
	}
}

// When the object is too large without status, providerConfig and backupBucketProviderStatus,
// there is no event.
func TestSnapshotTooLarge(t *testing.T) {
	for name, grow := range map[string]func(*extensionsv1alpha1.BackupEntry){
		"spec":        func(e *extensionsv1alpha1.BackupEntry) { e.Spec.BucketName = strings.Repeat("b", MaxDataSize) },
		"region":      func(e *extensionsv1alpha1.BackupEntry) { e.Spec.Region = strings.Repeat("r", MaxDataSize) },
		"annotations": func(e *extensionsv1alpha1.BackupEntry) { e.Annotations["big"] = strings.Repeat("a", MaxDataSize) },
	} {
		t.Run(name, func(t *testing.T) {
			entry := testEntry()
			grow(entry)
			data, err := Snapshot(KindBackupEntry, entry)
			if !errors.Is(err, ErrDataTooLarge) {
				t.Fatalf("Snapshot = %d bytes, %v; want ErrDataTooLarge", len(data), err)
			}
			if data != nil {
				t.Errorf("Snapshot returned %d bytes with its error", len(data))
			}
			if !strings.Contains(err.Error(), testEntryName) {
				t.Errorf("error %q does not name the object", err)
			}
			if _, err := NewObjectEvent(testCluster, KindBackupEntry, OpUpdated, entry); !errors.Is(err, ErrDataTooLarge) {
				t.Errorf("NewObjectEvent = %v, want ErrDataTooLarge", err)
			}
		})
	}
}
