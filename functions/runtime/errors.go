package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Class says what to do about a failed event.
type Class string

const (
	// ClassRetryable failures are redelivered later with backoff (the default for any error).
	ClassRetryable Class = "retryable"
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

// ClassOf classifies err: invalid events are permanent, unclassified errors retryable.
func ClassOf(err error) Class {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Class
	case errors.Is(err, events.ErrInvalidEvent), errors.Is(err, events.ErrUnknownType):
		return ClassPermanent
	default:
		return ClassRetryable
	}
}

func retryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
