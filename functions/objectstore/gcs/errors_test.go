package gcs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// A 429 or 503 keeps the delay its Retry-After asks for, for the runner's next try.
func TestClassifyKeepsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status     int
		reason     string
		retryAfter string
		want       time.Duration
	}{
		{429, "rateLimitExceeded", "9", 9 * time.Second},
		{503, "backendError", "4", 4 * time.Second},
		{429, "rateLimitExceeded", "", 0},
		{500, "backendError", "9", 0},
	} {
		t.Run(fmt.Sprintf("%d-%s", tc.status, tc.retryAfter), func(t *testing.T) {
			ge := &googleapi.Error{Code: tc.status, Header: http.Header{}, Errors: []googleapi.ErrorItem{{Reason: tc.reason}}}
			if tc.retryAfter != "" {
				ge.Header.Set("Retry-After", tc.retryAfter)
			}
			err := classify(fmt.Errorf("listing: %w", ge))
			if got := objectstore.RetryAfterOf(err); got != tc.want {
				t.Errorf("RetryAfterOf(%v) = %s, want %s", err, got, tc.want)
			}
			if throttled := tc.status != 500; errors.Is(err, objectstore.ErrThrottled) != throttled {
				t.Errorf("errors.Is(%v, ErrThrottled) = %v, want %v", err, !throttled, throttled)
			}
		})
	}
}
