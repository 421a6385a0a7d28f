package gardener

import (
	"encoding/json"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AnnotationShootPurpose is the purpose of the entry's shoot, for platforms without Gardener;
// under gardenlet the purpose recorded from the shoot's Cluster applies.
const AnnotationShootPurpose = "shoot.gardener.cloud/purpose"

// Under gardenlet the extension BackupEntry carries no shoot purpose: gardenlet reads it from
// the core Shoot. The seed has it in the shoot's Cluster resource only while the shoot
// exists, so the entry function records it in the entry's status.providerStatus while the
// entry lives, and the retention of a deleted entry and the drill's selection read it there.

// providerStatus is what housekeeper records in a BackupEntry's status.providerStatus.
type providerStatus struct {
	APIVersion   string `json:"apiVersion"`
	Kind         string `json:"kind"`
	ShootPurpose string `json:"shootPurpose,omitempty"`
}

const (
	providerStatusAPIVersion = "housekeeper.dev/v1alpha1"
	providerStatusKind       = "BackupEntryStatus"
)

// RecordedPurpose is the shoot purpose recorded in e's status, or "".
func RecordedPurpose(e *extensionsv1alpha1.BackupEntry) string {
	if e.Status.ProviderStatus == nil {
		return ""
	}
	var ps providerStatus
	if json.Unmarshal(e.Status.ProviderStatus.Raw, &ps) != nil || ps.Kind != providerStatusKind {
		return ""
	}
	return ps.ShootPurpose
}

// ShootPurpose is the purpose of e's shoot: its AnnotationShootPurpose where there is one (a
// platform without Gardener), else the purpose recorded in its status, else "".
func ShootPurpose(e *extensionsv1alpha1.BackupEntry) string {
	if p, ok := e.Annotations[AnnotationShootPurpose]; ok {
		return p
	}
	return RecordedPurpose(e)
}

// PurposeStatus is the status.providerStatus that records purpose on a BackupEntry.
func PurposeStatus(purpose string) (*runtime.RawExtension, error) {
	raw, err := json.Marshal(providerStatus{APIVersion: providerStatusAPIVersion, Kind: providerStatusKind, ShootPurpose: purpose})
	if err != nil {
		return nil, err
	}
	return &runtime.RawExtension{Raw: raw}, nil
}
