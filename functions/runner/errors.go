package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Class says what to do about a failed event.
type Class string

const (
	// ClassRetryable failures are redelivered later with backoff (the default for any error);
	// after the consumer's max deliver they are dead-lettered.
	ClassRetryable Class = "retryable"
	// ClassUnavailable failures are retryable ones caused by a dependency that could not be
	// reached or said it is overloaded (an API server restarting, an object store throttling).
	// They are retried with backoff for as long as the outage lasts and never dead-lettered for
	// it: an outage says nothing about the event, and a dead letter waits for an operator.
	ClassUnavailable Class = "unavailable"
	// ClassPermanent failures can never succeed as they are: dead-letter them with the reason.
	ClassPermanent Class = "permanent"
	// ClassWaiting means the object waits for something else to happen (another object to go
	// away, a namespace to appear) whose own event will trigger it again. The event is
	// settled; the error stays visible in the object's status.
	ClassWaiting Class = "waiting"
)

// Error is a classified handler error. What the error means to an object's API (Gardener's
// error codes, say) is the object layer's to attach, in err.
type Error struct {
	Class Class
	// RetryAfter, when set, overrides the backoff of a retryable error.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as one that retrying cannot fix.
func Permanent(err error) error {
	return &Error{Class: ClassPermanent, Err: err}
}

// Retryable marks err as transient.
func Retryable(err error) error {
	return &Error{Class: ClassRetryable, Err: err}
}

// Unavailable marks err as caused by a dependency that cannot be reached now.
func Unavailable(err error) error {
	return &Error{Class: ClassUnavailable, Err: err}
}

// RetryAfter asks for the event again after d (say, while waiting for another object),
// without counting as a failure of the function.
func RetryAfter(d time.Duration, err error) error {
	return &Error{Class: ClassRetryable, RetryAfter: d, Err: err}
}

// Waiting marks err as waiting for another change that will trigger the object again.
func Waiting(err error) error {
	return &Error{Class: ClassWaiting, Err: err}
}

// Permanentf is Permanent(fmt.Errorf(...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// ClassOf classifies err: invalid events are permanent, unclassified errors retryable, and a
// retryable error that a dependency's outage caused is unavailable.
func ClassOf(err error) Class {
	var e *Error
	class := ClassRetryable
	switch {
	case errors.As(err, &e):
		class = e.Class
	case errors.Is(err, events.ErrInvalidEvent), errors.Is(err, events.ErrUnknownType):
		return ClassPermanent
	}
	if class == ClassRetryable && outageOf(err) != "" {
		return ClassUnavailable
	}
	return class
}

// What an outage is, the cause label of the work waiting on it.
const (
	// OutageUnreachable: a connection failed, was cut or timed out.
	OutageUnreachable = "unreachable"
	// OutageThrottled: the dependency asked to slow down (429, a store's throttling).
	OutageThrottled = "throttled"
	// OutageUnavailable: the Kubernetes API server answered 500, 503 or 504 (etcd away, the
	// server starting) or timed out the request.
	OutageUnavailable = "unavailable"
	// OutageNATS: NATS or JetStream did not answer.
	OutageNATS = "nats"
)

// outages are the causes, in the order metrics list them.
var outages = []string{OutageUnreachable, OutageThrottled, OutageUnavailable, OutageNATS}

// outageOf says which outage err is ("" for none): a dependency could not be reached or is
// overloaded. A certificate that does not verify is no outage: it stays wrong until someone
// fixes it.
func outageOf(err error) string {
	var (
		netErr    net.Error
		apiStatus apierrors.APIStatus
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return ""
	case errors.Is(err, objectstore.ErrThrottled):
		return OutageThrottled
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, jetstream.ErrNoStreamResponse):
		return OutageNATS
	case errors.As(err, &apiStatus):
		switch code := apiStatus.Status().Code; {
		case code == http.StatusTooManyRequests:
			return OutageThrottled
		case code == http.StatusInternalServerError, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout,
			apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
			return OutageUnavailable
		}
		return ""
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return OutageUnreachable
	}
	return ""
}

// retryAfterOf is the delay err asks for before the next try: its Error's RetryAfter, else the
// delay a throttling object store asked for (0: none, the backoff decides).
func retryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return objectstore.RetryAfterOf(err)
}
