package entry

import (
	"context"
	"encoding/json"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Under gardenlet the extension BackupEntry carries no shoot purpose: gardenlet reads it from
// the core Shoot. The seed has it in the shoot's Cluster resource only while the shoot
// exists, so the entry function records it in the entry's status.providerStatus while the
// entry lives, and the retention of a deleted entry reads it from there.

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

// recordPurpose reads the purpose of e's shoot from its Cluster resource and records it in
// e's status. A seed without Cluster resources (no Gardener) or a shoot without one records
// nothing.
func (a *Actuator) recordPurpose(ctx context.Context, e *extensionsv1alpha1.BackupEntry, namespace string) error {
	cluster := &extensionsv1alpha1.Cluster{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: namespace}, cluster); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("reading Cluster %s for the shoot's purpose: %w", namespace, err)
	}
	var shoot struct {
		Spec struct {
			Purpose string `json:"purpose"`
		} `json:"spec"`
	}
	if len(cluster.Spec.Shoot.Raw) == 0 || json.Unmarshal(cluster.Spec.Shoot.Raw, &shoot) != nil || shoot.Spec.Purpose == "" {
		return nil
	}
	if RecordedPurpose(e) == shoot.Spec.Purpose {
		return nil
	}
	raw, err := json.Marshal(providerStatus{APIVersion: providerStatusAPIVersion, Kind: providerStatusKind, ShootPurpose: shoot.Spec.Purpose})
	if err != nil {
		return err
	}
	base := e.DeepCopy()
	e.Status.ProviderStatus = &runtime.RawExtension{Raw: raw}
	if err := a.Client.Status().Patch(ctx, e, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the shoot's purpose in the status of %s: %w", e.Name, err)
	}
	return nil
}
