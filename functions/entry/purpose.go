package entry

import (
	"context"
	"encoding/json"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// recordPurpose reads the purpose of e's shoot from its Cluster resource and records it in
// e's status (gardener.PurposeStatus): under gardenlet the extension BackupEntry carries no
// shoot purpose, and the Cluster is there only while the shoot exists. A seed without Cluster resources (no Gardener) or a shoot without one records
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
	if gardener.RecordedPurpose(e) == shoot.Spec.Purpose {
		return nil
	}
	status, err := gardener.PurposeStatus(shoot.Spec.Purpose)
	if err != nil {
		return err
	}
	base := e.DeepCopy()
	e.Status.ProviderStatus = status
	if err := a.Client.Status().Patch(ctx, e, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the shoot's purpose in the status of %s: %w", e.Name, err)
	}
	return nil
}
