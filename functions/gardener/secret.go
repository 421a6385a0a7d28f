package gardener

import (
	"context"
	"fmt"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// ReadSecretData reads the data of the secret ref points to. A missing secret is a
// configuration problem that waits for someone to create it.
func ReadSecretData(ctx context.Context, c client.Reader, ref corev1.SecretReference) (map[string][]byte, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, missingSecret(ref)
		}
		return nil, fmt.Errorf("reading secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return secret.Data, nil
}

// missingSecret is the error for a spec.secretRef that points nowhere. The object waits: the
// bridge announces it again when the secret appears (an entry may well be created before its
// bucket's generated secret).
func missingSecret(ref corev1.SecretReference) error {
	return runner.Waiting(&codedError{
		err:   fmt.Errorf("secret %s/%s referenced by spec.secretRef does not exist", ref.Namespace, ref.Name),
		codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
		task:  TaskWaitForSecret,
	})
}

// WaitsForSecret says whether obj's last attempt found its spec.secretRef secret missing
// (lastError.taskID is TaskWaitForSecret): only such an object needs announcing again when the
// secret appears.
func WaitsForSecret(obj extensionsv1alpha1.Object) bool {
	lastError := obj.GetExtensionStatus().GetLastError()
	return lastError != nil && lastError.TaskID != nil && *lastError.TaskID == TaskWaitForSecret
}
