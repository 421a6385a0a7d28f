package objectstore

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{"seconds with spaces", http.Header{"Retry-After": {" 7 "}}, 7 * time.Second},
		{"HTTP date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"date passed", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"date far off", http.Header{"Retry-After": {now.Add(48 * time.Hour).Format(http.TimeFormat)}}, MaxRetryAfter},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"fraction", http.Header{"Retry-After": {"1.5"}}, 0},
		{"words", http.Header{"Retry-After": {"soon"}}, 0},
		{"absurd", http.Header{"Retry-After": {"86400"}}, MaxRetryAfter},
		{"overflowing", http.Header{"Retry-After": {"99999999999999999999999"}}, MaxRetryAfter},
		{"Azure milliseconds", http.Header{"X-Ms-Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryAfter(tc.header, now); got != tc.want {
				t.Errorf("retryAfter(%v) = %s, want %s", tc.header, got, tc.want)
			}
		})
	}
}

func TestThrottledKeepsTheDelayAndIsErrThrottled(t *testing.T) {
	if err := Throttled(http.Header{}); err != ErrThrottled {
		t.Errorf("Throttled without Retry-After = %v, want ErrThrottled itself", err)
	}
	sentinel := Throttled(http.Header{"Retry-After": {"12"}})
	answer := &ResponseError{Sentinel: sentinel, Status: http.StatusServiceUnavailable, Code: "SlowDown", Cause: errors.New("the SDK's error")}
	err := fmt.Errorf("bucket %q: list: %w", "b", answer)
	if !errors.Is(err, ErrThrottled) {
		t.Errorf("errors.Is(%v, ErrThrottled) = false", err)
	}
	if got := RetryAfterOf(err); got != 12*time.Second {
		t.Errorf("RetryAfterOf(%v) = %s, want 12s", err, got)
	}
	if want := `bucket "b": list: throttled, retry after 12s (HTTP 503 SlowDown)`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	wrapped := &ThrottledError{RetryAfter: time.Hour, Err: errors.New("HTTP 429")}
	if got := RetryAfterOf(wrapped); got != MaxRetryAfter {
		t.Errorf("RetryAfterOf of an hour = %s, want MaxRetryAfter", got)
	}
	for _, err := range []error{nil, ErrThrottled, errors.New("other")} {
		if got := RetryAfterOf(err); got != 0 {
			t.Errorf("RetryAfterOf(%v) = %s, want 0", err, got)
		}
	}
}
