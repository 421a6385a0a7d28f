package objectstore

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors a caller acts on. Providers wrap them with a message naming the bucket, the key or
// the credential key at fault — never a credential's value.
var (
	// ErrUnknownType: no provider is registered for a BackupBucket's spec.type.
	ErrUnknownType = errors.New("unknown object store type")
	// ErrMissingCredentials: the credentials lack a required key (the message names it).
	ErrMissingCredentials = errors.New("missing credentials")
	// ErrInvalidCredentials: a credential key is present but unusable, e.g. a storage key
	// that is not base64 or an endpoint that is not a URL (the message names the key).
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrInvalidBucketName: the bucket name breaks the naming rules, or (S3, whose bucket
	// names are global) another account owns a bucket of that name; the message says which.
	ErrInvalidBucketName = errors.New("invalid bucket name")
	// ErrUnauthenticated: the store rejected the credentials themselves (Azure: HTTP 403
	// AuthenticationFailed — a wrong storage key).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrUnauthorized: the credentials are valid but not allowed to do this (HTTP 403 for any
	// other reason).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrBucketNotFound: the bucket does not exist.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrThrottled: the store asks to slow down (HTTP 429, 503 ServerBusy); retry later. When
	// it says how much later, the error is a [ThrottledError].
	ErrThrottled = errors.New("throttled")
	// ErrObjectLocked: the store refuses to delete an object (version) that object lock
	// protects — a retention period that has not ended, or a legal hold (S3). Retrying does not
	// help until the lock ends or someone lifts it.
	ErrObjectLocked = errors.New("object locked")
	// ErrInvalidKey: an object key is unusable: empty, too long, or (local) absolute,
	// escaping the bucket directory or holding "." or ".." segments.
	ErrInvalidKey = errors.New("invalid object key")
	// ErrObjectNotFound: Stat or Open found no object at the key.
	ErrObjectNotFound = errors.New("object not found")
	// ErrObjectChanged: a read broken mid-way could not resume because the object was replaced
	// since the read began (HTTP 412 to a GET with If-Match; GCS: the generation it began with is
	// gone, which a delete does too); its start and the new object's rest are never spliced. Open
	// it again to read the new one.
	ErrObjectChanged = errors.New("object changed while being read")
	// ErrInvalidConfig: the bucket's provider configuration (spec.providerConfig) is
	// malformed or asks for something the provider refuses; the message names the field.
	ErrInvalidConfig = errors.New("invalid provider config")
	// ErrQuotaExceeded: the account or subscription has reached a limit (Azure: too many
	// storage accounts); retrying helps only once someone raises it or frees room.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrNotReady: the credentials are not complete yet because another controller fills them
	// (a workload identity's token, which gardenlet's token requestor writes); wait for it.
	ErrNotReady = errors.New("credentials not ready")
)

// LockedError is ErrObjectLocked for a whole bucket: Count objects stay locked until Until (zero:
// a legal hold without end). They are marked for deletion.
type LockedError struct {
	Bucket string
	Count  int
	Until  time.Time
}

func (e *LockedError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("bucket %s: %d objects are held by a legal hold, marked for deletion", e.Bucket, e.Count)
	}
	return fmt.Sprintf("bucket %s cannot be removed before %s: %d objects are locked until then, marked for deletion", e.Bucket, e.Until.UTC().Format(time.RFC3339), e.Count)
}

func (e *LockedError) Unwrap() error { return ErrObjectLocked }

// ResponseError is a store's error answer reduced to what a caller acts on: the sentinel it
// means (nil: none), the HTTP status (0 for one key's error inside a batch answer), the store's
// own code for it, and a hint when the code alone does not say why. The store's message is left
// out (it may quote an account, a service account's address or a request's body); the client
// library's error stays reachable through errors.As, as Cause.
type ResponseError struct {
	Sentinel error
	Status   int
	Code     string
	Hint     string
	Cause    error
}

func (e *ResponseError) Error() string {
	var detail string
	switch {
	case e.Status != 0 && e.Code != "":
		detail = fmt.Sprintf("HTTP %d %s", e.Status, e.Code)
	case e.Status != 0:
		detail = fmt.Sprintf("HTTP %d", e.Status)
	default:
		detail = e.Code
	}
	msg := detail
	if e.Sentinel != nil {
		msg = e.Sentinel.Error() + " (" + detail + ")"
	}
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

func (e *ResponseError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Sentinel, e.Cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// MaxRetryAfter caps the delay a store's Retry-After asks for: a longer one is more likely a
// store's or a proxy's mistake than a plan, and the event would sit unseen for all of it.
const MaxRetryAfter = 5 * time.Minute

// ThrottledError is ErrThrottled (errors.Is matches it) with the delay the store asked for
// before the next try: its answer's Retry-After, at most MaxRetryAfter.
type ThrottledError struct {
	RetryAfter time.Duration
	// Err is the store's answer when nothing else wraps it; nil inside a ResponseError.
	Err error
}

func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("%s, retry after %s", ErrThrottled, e.RetryAfter)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }
func (e *ThrottledError) Unwrap() error        { return e.Err }

// Throttled is the sentinel of a throttling answer with headers h: a *ThrottledError when they
// say how long to wait ([RetryAfter]), ErrThrottled otherwise.
func Throttled(h http.Header) error {
	if d := RetryAfter(h); d > 0 {
		return &ThrottledError{RetryAfter: d}
	}
	return ErrThrottled
}

// RetryAfter is the delay an answer's headers ask for: Retry-After in seconds or as an HTTP
// date, or the milliseconds of x-ms-retry-after-ms or retry-after-ms (Azure's), first found
// first. It is at most MaxRetryAfter; 0 when they ask for none, or for one that is not a
// number, not a date, or not in the future.
func RetryAfter(h http.Header) time.Duration { return retryAfter(h, time.Now()) }

func retryAfter(h http.Header, now time.Time) time.Duration {
	for _, name := range []string{"x-ms-retry-after-ms", "retry-after-ms"} {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return delay(v, time.Millisecond)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), MaxRetryAfter)
	}
	return delay(v, time.Second)
}

// delay is v units, capped at MaxRetryAfter; 0 for a v that is no positive whole number.
func delay(v string, unit time.Duration) time.Duration {
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return MaxRetryAfter
	case err != nil:
		return 0
	}
	return time.Duration(min(n, uint64(MaxRetryAfter/unit))) * unit
}

// RetryAfterOf is the delay the first ThrottledError in err's tree asks for; 0 for none.
func RetryAfterOf(err error) time.Duration {
	var te *ThrottledError
	if errors.As(err, &te) {
		return min(max(te.RetryAfter, 0), MaxRetryAfter)
	}
	return 0
}
