package gcs

import (
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// responseError is a GCS error response reduced to what a caller needs: the sentinel it
// means (if any), the HTTP status and GCS's reason. The library's error stays reachable
// through errors.As (*googleapi.Error). The service's message is left out of Error(): it may
// quote a service account's address, and housekeeper's own words say what it means.
type responseError struct {
	sentinel error
	status   int
	reason   string
	cause    error
}

func (e *responseError) Error() string {
	detail := fmt.Sprintf("HTTP %d", e.status)
	if e.reason != "" {
		detail += " " + e.reason
	}
	if e.sentinel == nil {
		return detail
	}
	msg := e.sentinel.Error() + " (" + detail + ")"
	if errors.Is(e.sentinel, objectstore.ErrObjectLocked) {
		msg += ": the bucket's retention policy keeps it"
	}
	return msg
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

// classify maps a GCS error to the objectstore sentinels. A failed token exchange or signing is
// ErrUnauthenticated; other errors (transport failures, a cancelled context) are returned as
// they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w (HTTP 404)", objectstore.ErrBucketNotFound)
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("%w (HTTP 404)", objectstore.ErrObjectNotFound)
	}
	var te *tokenError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: %v", objectstore.ErrUnauthenticated, te)
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return err
	}
	reason := ""
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	return &responseError{sentinel: meaningOf(ge.Code, reason), status: ge.Code, reason: reason, cause: err}
}

// meaningOf is the sentinel of a GCS answer's status and reason, nil for none.
func meaningOf(status int, reason string) error {
	switch {
	case reason == "retentionPolicyNotMet" || reason == "objectUnderActiveHold":
		return objectstore.ErrObjectLocked
	case status == http.StatusUnauthorized:
		return objectstore.ErrUnauthenticated
	case status == http.StatusForbidden:
		return objectstore.ErrUnauthorized
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable, reason == "rateLimitExceeded":
		return objectstore.ErrThrottled
	case reason == "invalidBucketName":
		return objectstore.ErrInvalidBucketName
	}
	return nil
}
