package gardener

import (
	"errors"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// StoreError classifies an object-store error and attaches the Gardener error code: bad
// input (credentials, names, types) is permanent until someone corrects it, and so is an
// object that object lock protects (retrying cannot end a retention period; someone has to
// lift the lock or re-trigger the operation after it ends); throttling and other failures
// are retried.
func StoreError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objectstore.ErrUnauthenticated):
		return runtime.Permanent(err, gardencorev1beta1.ErrorInfraUnauthenticated)
	case errors.Is(err, objectstore.ErrUnauthorized):
		return runtime.Permanent(err, gardencorev1beta1.ErrorInfraUnauthorized)
	case errors.Is(err, objectstore.ErrMissingCredentials), errors.Is(err, objectstore.ErrInvalidCredentials), errors.Is(err, objectstore.ErrInvalidBucketName),
		errors.Is(err, objectstore.ErrUnknownType), errors.Is(err, objectstore.ErrInvalidKey):
		return runtime.Permanent(err, gardencorev1beta1.ErrorConfigurationProblem)
	case errors.Is(err, objectstore.ErrObjectLocked):
		return runtime.Permanent(err, gardencorev1beta1.ErrorConfigurationProblem)
	case errors.Is(err, objectstore.ErrThrottled):
		return runtime.Retryable(err, gardencorev1beta1.ErrorInfraRateLimitsExceeded)
	default:
		return runtime.Retryable(err, gardencorev1beta1.ErrorRetryableInfraDependencies)
	}
}
