package s3

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// responseError is an S3 error response reduced to what a caller needs: the sentinel it means
// (if any), the HTTP status (0 for a per-key error inside a DeleteObjects answer), S3's error
// code and, for a sentinel whose cause is not plain from the code, a hint. The SDK's error
// stays reachable through errors.As (smithy.APIError, *awshttp.ResponseError). The service's
// message is left out of Error(): housekeeper's own words say what it means.
type responseError struct {
	sentinel error
	status   int
	code     string
	hint     string
	cause    error
}

func (e *responseError) Error() string {
	var detail string
	switch {
	case e.status != 0 && e.code != "":
		detail = fmt.Sprintf("HTTP %d %s", e.status, e.code)
	case e.status != 0:
		detail = fmt.Sprintf("HTTP %d", e.status)
	default:
		detail = e.code
	}
	msg := detail
	if e.sentinel != nil {
		msg = e.sentinel.Error() + " (" + detail + ")"
	}
	if e.hint != "" {
		msg += ": " + e.hint
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

// classify maps an S3 error response to the objectstore sentinels. Other errors (transport
// failures, a cancelled context) are returned as they are.
func classify(err error) error {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	m := meaningOf(status, ae.ErrorCode(), ae.ErrorMessage())
	return &responseError{sentinel: m.sentinel, status: status, code: ae.ErrorCode(), hint: m.hint, cause: err}
}

// keyError is the error of one key in a DeleteObjects answer.
func keyError(code, message string) error {
	m := meaningOf(0, code, message)
	e := &responseError{sentinel: m.sentinel, code: code, hint: m.hint}
	if e.code == "" {
		e.code = "unknown error"
	}
	return e
}

const regionHint = "the bucket is in another region than the one given (spec.region or the secret's \"region\")"

// meaning is what an S3 error means to a caller: a sentinel (nil: nothing to act on) and, when
// the code alone does not say why, a hint.
type meaning struct {
	sentinel error
	hint     string
}

func meaningOf(status int, code, message string) meaning {
	switch code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
		"TokenRefreshRequired", "MissingSecurityHeader", "InvalidSecurity", "NotSignedUp":
		return meaning{objectstore.ErrUnauthenticated, ""}
	case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
		// Signed for, or asked of, the wrong region: the configuration is at fault.
		return meaning{objectstore.ErrInvalidCredentials, regionHint}
	case "NoSuchBucket":
		return meaning{objectstore.ErrBucketNotFound, ""}
	case "InvalidBucketName":
		return meaning{objectstore.ErrInvalidBucketName, ""}
	case "KeyTooLongError":
		return meaning{objectstore.ErrInvalidKey, ""}
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests",
		"RequestThrottled", "ServiceUnavailable", "Busy":
		return meaning{objectstore.ErrThrottled, ""}
	}
	if objectLocked(code, message) {
		return meaning{objectstore.ErrObjectLocked, "object lock protects it (a retention period that has not ended, or a legal hold)"}
	}
	switch {
	case code == "AccessDenied", code == "AllAccessDisabled", code == "AccountProblem", status == http.StatusForbidden:
		return meaning{objectstore.ErrUnauthorized, ""}
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
		return meaning{objectstore.ErrThrottled, ""}
	case status == http.StatusMovedPermanently:
		return meaning{objectstore.ErrInvalidCredentials, regionHint}
	}
	return meaning{nil, ""}
}

// objectLocked tells a delete refused by object lock from other refusals. AWS and versitygw
// answer AccessDenied "Access Denied because object protected by object lock."; MinIO says
// the object is "WORM protected".
func objectLocked(code, message string) bool {
	if code == "ObjectLocked" {
		return true
	}
	m := strings.ToLower(message)
	return strings.Contains(m, "object lock") || strings.Contains(m, "worm protected") || strings.Contains(m, "legal hold")
}

// isCode reports whether err is an S3 error response with the error code.
func isCode(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}
