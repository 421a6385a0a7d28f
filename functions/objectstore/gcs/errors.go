package gcs

import (
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

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
	return responseError(ge.Code, reason, ge.Header, err)
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

// responseError is a GCS answer's error (the library's is cause, nil inside a batch answer);
// its message is left out: it may quote a service account's address. A throttling answer keeps
// the delay its headers ask for (Retry-After).
func responseError(status int, reason string, header http.Header, cause error) error {
	e := &objectstore.ResponseError{Sentinel: meaningOf(status, reason), Status: status, Code: reason, Cause: cause}
	if e.Sentinel == objectstore.ErrThrottled {
		e.Sentinel = objectstore.Throttled(header)
	}
	if errors.Is(e.Sentinel, objectstore.ErrObjectLocked) {
		e.Hint = "the bucket's retention policy keeps it"
	}
	return e
}
