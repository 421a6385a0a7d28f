package swift

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// A throttling answer (503, 429, the ratelimit middleware's 498) keeps its Retry-After.
func TestClassifyKeepsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		want       time.Duration
	}{
		{503, "6", 6 * time.Second},
		{498, "", 0},
		{429, "soon", 0},
	} {
		h := http.Header{}
		if tc.retryAfter != "" {
			h.Set("Retry-After", tc.retryAfter)
		}
		err := classify(gophercloud.ErrUnexpectedResponseCode{Actual: tc.status, ResponseHeader: h, Body: []byte("slow down")})
		if !errors.Is(err, objectstore.ErrThrottled) || objectstore.RetryAfterOf(err) != tc.want {
			t.Errorf("HTTP %d with Retry-After %q: %v, delay %s; want ErrThrottled, %s", tc.status, tc.retryAfter, err, objectstore.RetryAfterOf(err), tc.want)
		}
	}
}
