package azure

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// responseErr builds the error azcore returns for an Azure error response.
func responseErr(status int, reason, code string) error {
	req, _ := http.NewRequest(http.MethodPut, "https://acct.blob.core.windows.net/c?restype=container", nil)
	body := ""
	if code != "" {
		body = `<?xml version="1.0" encoding="utf-8"?><Error><Code>` + code + `</Code><Message>` + reason + `</Message></Error>`
	}
	resp := &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	}
	if reason != "" {
		resp.Status = reason
	}
	if code != "" {
		resp.Header.Set("x-ms-error-code", code)
	}
	return runtime.NewResponseError(resp)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		want   error // nil: no sentinel
		inText string
	}{
		{"Azure wrong key", responseErr(403, "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.", "AuthenticationFailed"), objectstore.ErrUnauthenticated, "AuthenticationFailed"},
		{"Azurite wrong key", responseErr(403, "Server failed to authenticate the request. Make sure the value of the Authorization header is formed correctly including the signature.", "AuthorizationFailure"), objectstore.ErrUnauthenticated, "AuthorizationFailure"},
		{"HEAD without body", responseErr(403, "403 Server failed to authenticate the request.", ""), objectstore.ErrUnauthenticated, "HTTP 403"},
		{"not allowed", responseErr(403, "This request is not authorized to perform this operation.", "AuthorizationFailure"), objectstore.ErrUnauthorized, "AuthorizationFailure"},
		{"RBAC", responseErr(403, "This request is not authorized to perform this operation using this permission.", "AuthorizationPermissionMismatch"), objectstore.ErrUnauthorized, "AuthorizationPermissionMismatch"},
		{"container missing", responseErr(404, "The specified container does not exist.", "ContainerNotFound"), objectstore.ErrBucketNotFound, "ContainerNotFound"},
		{"429", responseErr(429, "", ""), objectstore.ErrThrottled, "HTTP 429"},
		{"server busy", responseErr(503, "Operations per second is over the account limit.", "ServerBusy"), objectstore.ErrThrottled, "ServerBusy"},
		{"invalid name", responseErr(400, "The specifed resource name contains invalid characters.", "InvalidResourceName"), objectstore.ErrInvalidBucketName, "InvalidResourceName"},
		{"internal", responseErr(500, "", "InternalError"), nil, "HTTP 500 InternalError"},
		{"immutable blob", responseErr(409, "This operation is not permitted as the blob is immutable due to a policy.", "BlobImmutableDueToPolicy"), objectstore.ErrObjectLocked, "BlobImmutableDueToPolicy"},
		{"being deleted", responseErr(409, "The specified container is being deleted.", "ContainerBeingDeleted"), nil, "ContainerBeingDeleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			sentinels := []error{objectstore.ErrUnauthenticated, objectstore.ErrUnauthorized, objectstore.ErrBucketNotFound, objectstore.ErrThrottled, objectstore.ErrInvalidBucketName, objectstore.ErrObjectLocked}
			for _, s := range sentinels {
				if errors.Is(got, s) != (s == tc.want) {
					t.Errorf("errors.Is(%q, %v) = %v", got, s, !(s == tc.want))
				}
			}
			var re *azcore.ResponseError
			if !errors.As(got, &re) {
				t.Error("the Azure response error is no longer reachable")
			}
			if !strings.Contains(got.Error(), tc.inText) {
				t.Errorf("message %q does not mention %q", got, tc.inText)
			}
			if strings.Contains(got.Error(), "\n") {
				t.Errorf("message is not one line: %q", got)
			}
		})
	}
	plain := errors.New("dial tcp: connection refused")
	if got := classify(plain); got != plain {
		t.Errorf("classify changed a transport error: %v", got)
	}
}

// ServerBusy and 429 keep the delay their answer asks for, for the runner's next try; Azure's
// x-ms-retry-after-ms says it in milliseconds.
func TestClassifyKeepsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		code   string
		header http.Header
		want   time.Duration
	}{
		{"server busy", 503, "ServerBusy", http.Header{"Retry-After": {"15"}}, 15 * time.Second},
		{"429", 429, "", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"milliseconds", 503, "ServerBusy", http.Header{"X-Ms-Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{"HTTP date", 503, "ServerBusy", http.Header{"Retry-After": {time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)}}, time.Minute},
		{"none", 503, "ServerBusy", http.Header{}, 0},
		{"invalid", 503, "ServerBusy", http.Header{"Retry-After": {"later"}}, 0},
		{"absurd", 429, "", http.Header{"Retry-After": {"100000"}}, objectstore.MaxRetryAfter},
		{"not throttled", 500, "InternalError", http.Header{"Retry-After": {"15"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := responseErr(tc.status, "", tc.code)
			var re *azcore.ResponseError
			errors.As(raw, &re)
			for k, v := range tc.header {
				re.RawResponse.Header[k] = v
			}
			err := classify(raw)
			got := objectstore.RetryAfterOf(err)
			// An HTTP date has whole seconds: the delay it leaves is up to a second short.
			if got > tc.want || got < tc.want-time.Second || (tc.want == 0) != (got == 0) {
				t.Errorf("RetryAfterOf(%v) = %s, want %s", err, got, tc.want)
			}
			if throttled := tc.code != "InternalError"; errors.Is(err, objectstore.ErrThrottled) != throttled {
				t.Errorf("errors.Is(%v, ErrThrottled) = %v, want %v", err, !throttled, throttled)
			}
		})
	}
}
