package gardener

import (
	"errors"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// TaskWaitForSecret is the lastError.taskID of an object whose spec.secretRef secret does not
// exist: the bridge announces exactly such objects again when the secret appears.
const TaskWaitForSecret = "housekeeper.dev/wait-for-secretRef"

// codedError attaches what lastError says about err besides its description: Gardener's error
// codes and, for a known wait, the task that waits.
type codedError struct {
	err   error
	codes []gardencorev1beta1.ErrorCode
	task  string
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// Permanent is runner.Permanent with the Gardener codes for lastError.
func Permanent(err error, codes ...gardencorev1beta1.ErrorCode) error {
	return runner.Permanent(&codedError{err: err, codes: codes})
}

// Retryable is runner.Retryable with the Gardener codes for lastError.
func Retryable(err error, codes ...gardencorev1beta1.ErrorCode) error {
	return runner.Retryable(&codedError{err: err, codes: codes})
}

// RetryAfter is runner.RetryAfter with the Gardener codes for lastError.
func RetryAfter(d time.Duration, err error, codes ...gardencorev1beta1.ErrorCode) error {
	return runner.RetryAfter(d, &codedError{err: err, codes: codes})
}

// Waiting is runner.Waiting with the Gardener codes for lastError.
func Waiting(err error, codes ...gardencorev1beta1.ErrorCode) error {
	return runner.Waiting(&codedError{err: err, codes: codes})
}

// CodesOf returns the Gardener error codes attached to err.
func CodesOf(err error) []gardencorev1beta1.ErrorCode {
	var e *codedError
	if errors.As(err, &e) {
		return e.codes
	}
	return nil
}

// taskOf returns the task attached to err, "" if none.
func taskOf(err error) string {
	var e *codedError
	if errors.As(err, &e) {
		return e.task
	}
	return ""
}

// StoreError classifies an object-store error and attaches the Gardener error code: bad
// input (credentials, names, types) is permanent until someone corrects it, and so is an
// object that object lock protects (retrying cannot end a retention period; someone has to
// lift the lock or re-trigger the operation after it ends); throttling and other failures
// are retried.
func StoreError(err error) error {
	var locked *objectstore.LockedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objectstore.ErrUnauthenticated):
		return Permanent(err, gardencorev1beta1.ErrorInfraUnauthenticated)
	case errors.Is(err, objectstore.ErrUnauthorized):
		return Permanent(err, gardencorev1beta1.ErrorInfraUnauthorized)
	case errors.Is(err, objectstore.ErrMissingCredentials), errors.Is(err, objectstore.ErrInvalidCredentials), errors.Is(err, objectstore.ErrInvalidBucketName),
		errors.Is(err, objectstore.ErrUnknownType), errors.Is(err, objectstore.ErrInvalidKey), errors.Is(err, objectstore.ErrInvalidConfig):
		return Permanent(err, gardencorev1beta1.ErrorConfigurationProblem)
	case errors.Is(err, objectstore.ErrNotReady):
		return Waiting(err) // the secret's update announces the object again
	case errors.Is(err, objectstore.ErrQuotaExceeded):
		return Retryable(err, gardencorev1beta1.ErrorInfraQuotaExceeded) // raised without an event to tell us
	case errors.As(err, &locked) && !locked.Until.IsZero():
		// A bucket that cannot go before its objects' locks end: tried again just after.
		return RetryAfter(time.Until(locked.Until)+time.Second, err, gardencorev1beta1.ErrorRetryableInfraDependencies)
	case errors.Is(err, objectstore.ErrObjectLocked):
		return Permanent(err, gardencorev1beta1.ErrorConfigurationProblem)
	case errors.Is(err, objectstore.ErrThrottled):
		return Retryable(err, gardencorev1beta1.ErrorInfraRateLimitsExceeded)
	default:
		return Retryable(err, gardencorev1beta1.ErrorRetryableInfraDependencies)
	}
}
