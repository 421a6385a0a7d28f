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

// ErrObjectChanged says the live object changed while an actuator worked on the copy it was
// given (released, or deleted and re-created under its name), so that going on would act for
// an object that is no longer there. The Reconciler writes nothing for it; the runner retries,
// and the retry reads the live object again.
var ErrObjectChanged = errors.New("the object changed while it was worked on")

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

// FromStore marks err as the object store's answer, for Classify: the actuators wrap what the
// store says and return it, and the status writer classifies it once.
func FromStore(err error) error {
	if err == nil {
		return nil
	}
	return &storeError{err: err}
}

// storeError is an error the object store returned (FromStore).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// Classify gives err what it tells the runner (its class) and lastError (Gardener's codes), once,
// where it leaves the protocol (StatusWriter.Fail). An error that has a class or codes already
// keeps them, and one that is not the object store's (FromStore) stays as it is: retryable,
// without codes. The store's bad input (credentials, names, types) is permanent until someone
// corrects it, and so is an object that object lock protects (retrying cannot end a retention
// period; someone has to lift the lock or re-trigger the operation after it ends); throttling
// and other failures are retried.
func Classify(err error) error {
	var store *storeError
	if err == nil || classified(err) || !errors.As(err, &store) {
		return err
	}
	var locked *objectstore.LockedError
	switch {
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

// classified says whether err has a class for the runner or codes for lastError already.
func classified(err error) bool {
	var class *runner.Error
	var coded *codedError
	return errors.As(err, &class) || errors.As(err, &coded)
}
