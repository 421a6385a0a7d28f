package gardener

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Each object-store error gets its class and code; a bucket whose objects are locked until a
// known time is tried again just after it.
func TestClassifyStoreErrors(t *testing.T) {
	until := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		err   error
		class runner.Class
		code  gardencorev1beta1.ErrorCode
	}{
		{fmt.Errorf("x: %w", objectstore.ErrUnauthenticated), runner.ClassPermanent, gardencorev1beta1.ErrorInfraUnauthenticated},
		{fmt.Errorf("x: %w", objectstore.ErrUnauthorized), runner.ClassPermanent, gardencorev1beta1.ErrorInfraUnauthorized},
		{fmt.Errorf("x: %w", objectstore.ErrInvalidConfig), runner.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem},
		{fmt.Errorf("x: %w", objectstore.ErrQuotaExceeded), runner.ClassRetryable, gardencorev1beta1.ErrorInfraQuotaExceeded},
		{fmt.Errorf("x: %w", objectstore.ErrThrottled), runner.ClassUnavailable, gardencorev1beta1.ErrorInfraRateLimitsExceeded},
		{fmt.Errorf("x: %w", objectstore.ErrNotReady), runner.ClassWaiting, ""},
		{fmt.Errorf("x: %w", objectstore.ErrObjectLocked), runner.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem},
		{&objectstore.LockedError{Bucket: "b", Count: 2}, runner.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem}, // a legal hold: someone must lift it
		{fmt.Errorf("deleting: %w", &objectstore.LockedError{Bucket: "b", Count: 2, Until: until}), runner.ClassRetryable, gardencorev1beta1.ErrorRetryableInfraDependencies},
		{errors.New("connection reset"), runner.ClassRetryable, gardencorev1beta1.ErrorRetryableInfraDependencies},
	} {
		err := Classify(FromStore(tc.err))
		if got := runner.ClassOf(err); got != tc.class {
			t.Errorf("%v: class %v, want %v", tc.err, got, tc.class)
		}
		if codes := CodesOf(err); tc.code != "" && !slices.Contains(codes, tc.code) || tc.code == "" && len(codes) != 0 {
			t.Errorf("%v: codes %v, want %q", tc.err, codes, tc.code)
		}
	}
	var e *runner.Error
	err := Classify(FromStore(&objectstore.LockedError{Bucket: "b", Count: 2, Until: until}))
	if !errors.As(err, &e) || e.RetryAfter < 59*time.Minute || e.RetryAfter > 61*time.Minute {
		t.Errorf("a bucket locked for an hour: %v, want it retried in about an hour", err)
	}
}

// Only the object store's errors are classified by what the store said: an error that is not
// the store's stays unclassified, and one that has a class and codes already keeps them.
func TestClassifyLeavesOtherErrors(t *testing.T) {
	plain := fmt.Errorf("x: %w", objectstore.ErrUnauthenticated)
	if err := Classify(plain); err != plain {
		t.Errorf("an error not marked as the store's: %v, want it unchanged", err)
	}
	waiting := Waiting(errors.New("entries use the bucket"), gardencorev1beta1.ErrorRetryableInfraDependencies)
	err := Classify(FromStore(fmt.Errorf("x: %w", waiting)))
	if runner.ClassOf(err) != runner.ClassWaiting || !slices.Equal(CodesOf(err), []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies}) {
		t.Errorf("a classified error: class %v, codes %v, want it as it was", runner.ClassOf(err), CodesOf(err))
	}
}
