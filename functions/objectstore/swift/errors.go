package swift

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// classify maps a Swift or Keystone error answer to the objectstore sentinels (gophercloud's
// words, which quote the answer's body, are left out); other errors (transport failures, a
// cancelled context) are returned as they are.
func classify(err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		return err
	}
	sentinel := meaningOf(ue.Actual)
	if sentinel == objectstore.ErrThrottled {
		sentinel = objectstore.Throttled(ue.ResponseHeader) // a 503's Retry-After, when sent
	}
	return &objectstore.ResponseError{Sentinel: sentinel, Status: ue.Actual, Cause: err}
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
	return &objectstore.ResponseError{Sentinel: meaningOf(code), Status: code}
}
