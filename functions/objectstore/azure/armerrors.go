package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// errNotFound marks an ARM 404: a resource group or storage account that does not exist.
var errNotFound = errors.New("not found")

// armError classifies an error of Azure Resource Manager or of Microsoft Entra ID, and says
// which step failed and as whom. The message keeps Azure's error code and drops the rest of
// the response (a request URL, a body that may echo parameters).
func (a *account) armError(err error, what string) error {
	if err == nil {
		return nil
	}
	prefix := "azure: "
	if what != "" {
		prefix += what + " as " + a.who.String() + ": "
	}
	var authErr *azidentity.AuthenticationFailedError
	if errors.As(err, &authErr) {
		return &armFailure{
			msg:      fmt.Sprintf("%s%v (Microsoft Entra ID refused the %s: %s)", prefix, objectstore.ErrUnauthenticated, a.who.kind, entraCode(authErr.RawResponse)),
			sentinel: objectstore.ErrUnauthenticated, cause: err,
		}
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s%w", prefix, err)
	}
	detail := fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode)
	f := &armFailure{msg: prefix + detail, sentinel: armSentinel(re), cause: err}
	if f.sentinel != nil {
		f.msg = fmt.Sprintf("%s%v (%s)", prefix, f.sentinel, detail)
	}
	return f
}

// armFailure is a classified ARM or Entra ID error: its message is ours (the step, the
// caller, the code); the SDK's error stays reachable with errors.As, but is not printed.
type armFailure struct {
	msg             string
	sentinel, cause error
}

func (e *armFailure) Error() string { return e.msg }
func (e *armFailure) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.cause}
	}
	return []error{e.sentinel, e.cause}
}

func armSentinel(re *azcore.ResponseError) error {
	code := re.ErrorCode
	switch {
	case re.StatusCode == http.StatusUnauthorized, code == "InvalidAuthenticationToken", code == "InvalidAuthenticationTokenTenant":
		return objectstore.ErrUnauthenticated
	case re.StatusCode == http.StatusForbidden, code == "AuthorizationFailed", code == "LinkedAuthorizationFailed":
		return objectstore.ErrUnauthorized
	case code == "SubscriptionNotFound", code == "InvalidSubscriptionId":
		return objectstore.ErrInvalidCredentials
	case strings.Contains(code, "Quota") || (strings.HasSuffix(code, "LimitExceeded") && code != "RequestLimitExceeded"),
		code == "TooManyStorageAccounts":
		return objectstore.ErrQuotaExceeded
	case re.StatusCode == http.StatusTooManyRequests, code == "RequestLimitExceeded":
		return objectstore.Throttled(headerOf(re))
	case code == "StorageAccountAlreadyTaken":
		return objectstore.ErrInvalidBucketName // another subscription owns the account name
	case re.StatusCode == http.StatusNotFound:
		return errNotFound
	}
	return nil
}

// hasCode reports whether err is an ARM response with the error code.
func hasCode(err error, code string) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == code
}

// entraCode returns the OAuth error and the AADSTS code of a refused token request, such as
// "invalid_client AADSTS7000215", never the description (it may name the client's secrets'
// IDs) and never the request.
func entraCode(resp *http.Response) string {
	if resp == nil || resp.Body == nil {
		return "no response"
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error      string `json:"error"`
		ErrorCodes []int  `json:"error_codes"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if len(e.ErrorCodes) > 0 {
		return fmt.Sprintf("%s AADSTS%d", e.Error, e.ErrorCodes[0])
	}
	return e.Error
}
