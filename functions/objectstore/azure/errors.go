package azure

import (
	"errors"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// classify maps an Azure error response to the objectstore sentinels; a throttling answer
// keeps the delay its Retry-After asks for. Other errors (transport failures, a cancelled
// context) are returned as they are.
func classify(err error) error {
	var re *azcore.ResponseError
	if err == nil || !errors.As(err, &re) {
		return err
	}
	return &objectstore.ResponseError{Sentinel: sentinelFor(re), Status: re.StatusCode, Code: re.ErrorCode, Cause: err}
}

func sentinelFor(re *azcore.ResponseError) error {
	code := bloberror.Code(re.ErrorCode)
	switch {
	case re.StatusCode == http.StatusForbidden && authenticationFailed(re):
		return objectstore.ErrUnauthenticated
	case re.StatusCode == http.StatusForbidden:
		return objectstore.ErrUnauthorized
	case code == bloberror.ContainerNotFound:
		return objectstore.ErrBucketNotFound
	case code == bloberror.BlobImmutableDueToPolicy:
		return objectstore.ErrObjectLocked
	case re.StatusCode == http.StatusTooManyRequests, re.StatusCode == http.StatusServiceUnavailable,
		code == bloberror.ServerBusy:
		return objectstore.Throttled(headerOf(re))
	case code == bloberror.InvalidResourceName && re.StatusCode == http.StatusBadRequest:
		return objectstore.ErrInvalidBucketName
	}
	return nil
}

// headerOf is the headers of the answer re is about; nil when there is none.
func headerOf(re *azcore.ResponseError) http.Header {
	if re.RawResponse == nil {
		return nil
	}
	return re.RawResponse.Header
}

// authenticationFailed tells a rejected signature (a wrong storage key) from a refused
// permission. Azure says AuthenticationFailed; Azurite says AuthorizationFailure for both and
// tells them apart only by its message, "Server failed to authenticate the request", which
// Azure uses too and which also reaches us as the status line of body-less (HEAD) responses.
func authenticationFailed(re *azcore.ResponseError) bool {
	if bloberror.Code(re.ErrorCode) == bloberror.AuthenticationFailed {
		return true
	}
	if re.RawResponse != nil && strings.Contains(strings.ToLower(re.RawResponse.Status), "failed to authenticate") {
		return true
	}
	return strings.Contains(strings.ToLower(re.Error()), "server failed to authenticate the request")
}
