package entry

import (
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

func entryWith(name string, annotations map[string]string, purpose string) *extensionsv1alpha1.BackupEntry {
	e := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if purpose != "" {
		e.Status.ProviderStatus, _ = gardener.PurposeStatus(purpose)
	}
	return e
}

func TestRetentionOf(t *testing.T) {
	r := Retention{Default: 72 * time.Hour, ByPurpose: map[string]time.Duration{"evaluation": time.Hour, "production": 30 * 24 * time.Hour}}
	const name = "shoot--dev--app--6f1c"
	for _, tc := range []struct {
		what  string
		entry *extensionsv1alpha1.BackupEntry
		want  time.Duration
	}{
		{"default", entryWith(name, nil, ""), 72 * time.Hour},
		{"source- entry: at once, whatever else it says", entryWith("source-"+name, map[string]string{AnnotationRetention: "240h"}, "production"), 0},
		{"force-deletion true", entryWith(name, map[string]string{AnnotationForceDeletion: "true"}, ""), 0},
		{"force-deletion True, parsed as gardenlet does", entryWith(name, map[string]string{AnnotationForceDeletion: "True"}, ""), 0},
		{"force-deletion 1", entryWith(name, map[string]string{AnnotationForceDeletion: "1"}, ""), 0},
		{"force-deletion false", entryWith(name, map[string]string{AnnotationForceDeletion: "false"}, ""), 72 * time.Hour},
		{"force-deletion garbage is no force", entryWith(name, map[string]string{AnnotationForceDeletion: "yes please"}, ""), 72 * time.Hour},
		{"annotation", entryWith(name, map[string]string{AnnotationRetention: "5m"}, "production"), 5 * time.Minute},
		{"purpose recorded from the shoot's Cluster", entryWith(name, nil, "evaluation"), time.Hour},
		{"purpose annotation wins over the recorded one", entryWith(name, map[string]string{gardener.AnnotationShootPurpose: "production"}, "evaluation"), 30 * 24 * time.Hour},
		{"unknown purpose: default", entryWith(name, nil, "testing"), 72 * time.Hour},
	} {
		got, err := r.Of(tc.entry)
		if err != nil || got != tc.want {
			t.Errorf("%s: retention %s, %v; want %s", tc.what, got, err, tc.want)
		}
	}
	if _, err := r.Of(entryWith(name, map[string]string{AnnotationRetention: "three days"}, "")); err == nil {
		t.Error("a malformed retention annotation was accepted")
	}
}

func TestRecordedPurposeIgnoresForeignProviderStatus(t *testing.T) {
	e := entryWith("shoot--dev--app--1", nil, "")
	e.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupStatus","shootPurpose":"evaluation"}`)}
	if p := gardener.RecordedPurpose(e); p != "" {
		t.Errorf("purpose %q read from another provider's status", p)
	}
}

func TestShootPurpose(t *testing.T) {
	const name = "shoot--dev--app--6f1c"
	for _, tc := range []struct {
		what  string
		entry *extensionsv1alpha1.BackupEntry
		want  string
	}{
		{"none known", entryWith(name, nil, ""), ""},
		{"recorded from the shoot's Cluster", entryWith(name, nil, "evaluation"), "evaluation"},
		{"the annotation wins", entryWith(name, map[string]string{gardener.AnnotationShootPurpose: "production"}, "evaluation"), "production"},
		{"an empty annotation is a purpose of none", entryWith(name, map[string]string{gardener.AnnotationShootPurpose: ""}, "evaluation"), ""},
	} {
		if got := gardener.ShootPurpose(tc.entry); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
	}
}
