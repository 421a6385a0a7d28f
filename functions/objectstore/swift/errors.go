package swift

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// responseError is a Swift or Keystone error answer reduced to what a caller needs: the
// sentinel it means (if any) and the HTTP status. gophercloud's error stays reachable through
// errors.As; its words, which quote the answer's body, are left out.
type responseError struct {
	sentinel error
	status   int
	cause    error
}

func (e *responseError) Error() string {
	if e.sentinel == nil {
		return fmt.Sprintf("HTTP %d", e.status)
	}
	return fmt.Sprintf("%v (HTTP %d)", e.sentinel, e.status)
}

func (e *responseError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.sentinel, e.cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// classify maps an error answer to the objectstore sentinels; other errors (transport
// failures, a cancelled context) are returned as they are.
func classify(err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		return err
	}
	return &responseError{sentinel: meaningOf(ue.Actual), status: ue.Actual, cause: err}
}

func meaningOf(status int) error {
	switch status {
	case http.StatusUnauthorized:
		return objectstore.ErrUnauthenticated
	case http.StatusForbidden:
		return objectstore.ErrUnauthorized
	case http.StatusNotFound:
		return objectstore.ErrBucketNotFound
	case http.StatusTooManyRequests, 498, http.StatusServiceUnavailable: // 498: Swift's ratelimit
		return objectstore.ErrThrottled
	case http.StatusRequestEntityTooLarge:
		return objectstore.ErrQuotaExceeded
	}
	return nil
}

// statusError is the error of a status line in a bulk delete's answer ("409 Conflict").
func statusError(status string) error {
	code, _ := strconv.Atoi(strings.Fields(status + " 0")[0])
	return &responseError{sentinel: meaningOf(code), status: code}
}
