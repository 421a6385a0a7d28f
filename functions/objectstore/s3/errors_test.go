package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// responseErr builds the error the SDK returns for an S3 error response.
func responseErr(status int, code, message string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: message},
		},
	}}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status        int
		code, message string
		want          error
	}{
		{403, "SignatureDoesNotMatch", "The request signature we calculated does not match", objectstore.ErrUnauthenticated},
		{403, "InvalidAccessKeyId", "", objectstore.ErrUnauthenticated},
		{400, "ExpiredToken", "", objectstore.ErrUnauthenticated},
		{403, "AccessDenied", "Access Denied", objectstore.ErrUnauthorized},
		{403, "", "", objectstore.ErrUnauthorized}, // HEAD: no body
		{403, "AccessDenied", "Access Denied because object protected by object lock.", objectstore.ErrObjectLocked},
		{404, "NoSuchBucket", "", objectstore.ErrBucketNotFound},
		{503, "SlowDown", "", objectstore.ErrThrottled},
		{429, "", "", objectstore.ErrThrottled},
		{400, "AuthorizationHeaderMalformed", "the region 'us-east-1' is wrong; expecting 'eu-west-1'", objectstore.ErrInvalidCredentials},
		{301, "PermanentRedirect", "", objectstore.ErrInvalidCredentials},
		{400, "InvalidBucketName", "", objectstore.ErrInvalidBucketName},
		{500, "InternalError", "", nil},
	} {
		t.Run(fmt.Sprintf("%d-%s", tc.status, tc.code), func(t *testing.T) {
			err := classify(responseErr(tc.status, tc.code, tc.message))
			for _, s := range []error{objectstore.ErrUnauthenticated, objectstore.ErrUnauthorized, objectstore.ErrObjectLocked,
				objectstore.ErrBucketNotFound, objectstore.ErrThrottled, objectstore.ErrInvalidCredentials, objectstore.ErrInvalidBucketName} {
				if got := errors.Is(err, s); got != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
				}
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tc.code {
				t.Errorf("the SDK's error is not reachable through errors.As: %v", err)
			}
		})
	}
	if err := classify(context.Canceled); err != context.Canceled {
		t.Errorf("classify(context.Canceled) = %v, want it as it is", err)
	}
	if err := keyError("AccessDenied", "Access Denied because object protected by object lock."); !errors.Is(err, objectstore.ErrObjectLocked) {
		t.Errorf("keyError of a locked version = %v, want ErrObjectLocked", err)
	}
}

// SlowDown and 429 keep the delay their Retry-After asks for, for the runner's next try.
func TestClassifyKeepsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		status     int
		code       string
		retryAfter string
		want       time.Duration
	}{
		{503, "SlowDown", "20", 20 * time.Second},
		{429, "", "3", 3 * time.Second},
		{503, "SlowDown", "", 0},
		{503, "SlowDown", "-1", 0},
		{503, "SlowDown", "3600", objectstore.MaxRetryAfter},
		{500, "InternalError", "20", 0}, // no throttling: nothing to wait for
	} {
		t.Run(fmt.Sprintf("%d-%s-%s", tc.status, tc.code, tc.retryAfter), func(t *testing.T) {
			raw := responseErr(tc.status, tc.code, "")
			var re *awshttp.ResponseError
			errors.As(raw, &re)
			re.Response.Header = http.Header{}
			if tc.retryAfter != "" {
				re.Response.Header.Set("Retry-After", tc.retryAfter)
			}
			err := classify(raw)
			if got := objectstore.RetryAfterOf(err); got != tc.want {
				t.Errorf("RetryAfterOf(%v) = %s, want %s", err, got, tc.want)
			}
			if throttled := tc.code != "InternalError"; errors.Is(err, objectstore.ErrThrottled) != throttled {
				t.Errorf("errors.Is(%v, ErrThrottled) = %v, want %v", err, !throttled, throttled)
			}
		})
	}
}
