package s3

import (
	"errors"
	"net/http"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// classify maps an S3 error response to the objectstore sentinels; a throttling answer keeps
// the delay its Retry-After asks for. Other errors (transport failures, a cancelled context)
// are returned as they are.
func classify(err error) error {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	status := 0
	var header http.Header
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
		if re.Response != nil && re.Response.Response != nil {
			header = re.Response.Header
		}
	}
	m := meaningOf(status, ae.ErrorCode(), ae.ErrorMessage())
	if m.sentinel == objectstore.ErrThrottled {
		m.sentinel = objectstore.Throttled(header) // SlowDown's Retry-After, when the store sends one
	}
	return &objectstore.ResponseError{Sentinel: m.sentinel, Status: status, Code: ae.ErrorCode(), Hint: m.hint, Cause: err}
}

// keyError is the error of one key in a DeleteObjects answer.
func keyError(code, message string) error {
	m := meaningOf(0, code, message)
	e := &objectstore.ResponseError{Sentinel: m.sentinel, Code: code, Hint: m.hint}
	if e.Code == "" {
		e.Code = "unknown error"
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
