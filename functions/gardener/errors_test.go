package gardener

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// The runtime classifies; this layer adds what lastError says. Both survive wrapping.
func TestErrorsCarryClassAndCodes(t *testing.T) {
	cause := errors.New("403 from the store")
	for _, tc := range []struct {
		err   error
		class runtime.Class
	}{
		{Permanent(cause, gardencorev1beta1.ErrorInfraUnauthorized), runtime.ClassPermanent},
		{Retryable(cause, gardencorev1beta1.ErrorInfraUnauthorized), runtime.ClassRetryable},
		{Waiting(cause, gardencorev1beta1.ErrorInfraUnauthorized), runtime.ClassWaiting},
	} {
		err := fmt.Errorf("deleting: %w", tc.err)
		if got := runtime.ClassOf(err); got != tc.class {
			t.Errorf("%v: class %s, want %s", tc.err, got, tc.class)
		}
		if got := CodesOf(err); !slices.Equal(got, []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthorized}) {
			t.Errorf("%v: codes %v", tc.err, got)
		}
		if !errors.Is(err, cause) || err.Error() != "deleting: 403 from the store" {
			t.Errorf("%v lost its cause or changed its text", err)
		}
	}
	if CodesOf(runtime.Permanent(cause)) != nil || CodesOf(cause) != nil {
		t.Error("codes on an error nobody coded")
	}
}

// "Waiting for its secret" is a field the bridge reads (lastError.taskID), not a sentence it
// matches: the same description without the task is not a wait, and another wait is not one
// for the secret.
func TestWaitsForSecretReadsTheTask(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	missing := missingSecret(corev1.SecretReference{Namespace: "garden", Name: "backupprovider"})
	if runtime.ClassOf(missing) != runtime.ClassWaiting {
		t.Errorf("a missing secret is %s, want waiting", runtime.ClassOf(missing))
	}
	record := func(err error) *extensionsv1alpha1.BackupEntry {
		e := &extensionsv1alpha1.BackupEntry{}
		setError(e, gardencorev1beta1.LastOperationTypeCreate, gardencorev1beta1.LastOperationStateError, err.Error(), CodesOf(err), taskOf(err), now)
		return e
	}
	e := record(missing)
	if !WaitsForSecret(e) {
		t.Errorf("lastError %+v: not seen as waiting for its secret", e.Status.LastError)
	}
	if id := e.Status.LastError.TaskID; id == nil || *id != TaskWaitForSecret {
		t.Errorf("lastError.taskID = %v, want %s", id, TaskWaitForSecret)
	}
	if !slices.Equal(e.Status.LastError.Codes, []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}) {
		t.Errorf("lastError.codes = %v", e.Status.LastError.Codes)
	}
	for _, other := range []error{
		Permanent(errors.New(missing.Error()), gardencorev1beta1.ErrorConfigurationProblem),
		Waiting(errors.New("BackupEntries still use bucket b"), gardencorev1beta1.ErrorRetryableInfraDependencies),
	} {
		if e := record(other); WaitsForSecret(e) {
			t.Errorf("%q (task %v) seen as waiting for its secret", other, e.Status.LastError.TaskID)
		}
	}
	setSucceeded(e, gardencorev1beta1.LastOperationTypeCreate, "created", now)
	if WaitsForSecret(e) {
		t.Error("still waiting after success")
	}
}
