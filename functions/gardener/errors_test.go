package gardener

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// Each object-store error gets its class and code; a bucket whose objects are locked until a
// known time is tried again just after it.
func TestStoreError(t *testing.T) {
	until := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		err   error
		class runtime.Class
		code  gardencorev1beta1.ErrorCode
	}{
		{fmt.Errorf("x: %w", objectstore.ErrUnauthenticated), runtime.ClassPermanent, gardencorev1beta1.ErrorInfraUnauthenticated},
		{fmt.Errorf("x: %w", objectstore.ErrUnauthorized), runtime.ClassPermanent, gardencorev1beta1.ErrorInfraUnauthorized},
		{fmt.Errorf("x: %w", objectstore.ErrInvalidConfig), runtime.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem},
		{fmt.Errorf("x: %w", objectstore.ErrQuotaExceeded), runtime.ClassRetryable, gardencorev1beta1.ErrorInfraQuotaExceeded},
		{fmt.Errorf("x: %w", objectstore.ErrThrottled), runtime.ClassUnavailable, gardencorev1beta1.ErrorInfraRateLimitsExceeded},
		{fmt.Errorf("x: %w", objectstore.ErrNotReady), runtime.ClassWaiting, ""},
		{fmt.Errorf("x: %w", objectstore.ErrObjectLocked), runtime.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem},
		{&objectstore.LockedError{Bucket: "b", Count: 2}, runtime.ClassPermanent, gardencorev1beta1.ErrorConfigurationProblem}, // a legal hold: someone must lift it
		{fmt.Errorf("deleting: %w", &objectstore.LockedError{Bucket: "b", Count: 2, Until: until}), runtime.ClassRetryable, gardencorev1beta1.ErrorRetryableInfraDependencies},
		{errors.New("connection reset"), runtime.ClassRetryable, gardencorev1beta1.ErrorRetryableInfraDependencies},
	} {
		err := StoreError(tc.err)
		if got := runtime.ClassOf(err); got != tc.class {
			t.Errorf("%v: class %v, want %v", tc.err, got, tc.class)
		}
		if codes := CodesOf(err); tc.code != "" && !slices.Contains(codes, tc.code) || tc.code == "" && len(codes) != 0 {
			t.Errorf("%v: codes %v, want %q", tc.err, codes, tc.code)
		}
	}
	var e *runtime.Error
	err := StoreError(&objectstore.LockedError{Bucket: "b", Count: 2, Until: until})
	if !errors.As(err, &e) || e.RetryAfter < 59*time.Minute || e.RetryAfter > 61*time.Minute {
		t.Errorf("a bucket locked for an hour: %v, want it retried in about an hour", err)
	}
}
