package runner

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Outcomes of handling one delivery, as housekeeper_function_handled_total counts them.
const (
	outcomeSuccess    = "success"
	outcomeRetry      = "retry"
	outcomeDeadLetter = "deadletter"
	outcomeShutdown   = "shutdown"
	outcomeWaiting    = "waiting"
)

// classSucceeded is the class of a nil error: the row of the table for success.
const classSucceeded Class = ""

// settlement is what becomes of an event whose handler returned an error of some class.
type settlement struct {
	// outcome is the metric's outcome; the pull worker acks (success, waiting), schedules a
	// retry (retry) or dead-letters (deadletter).
	outcome string
	// budgeted retries count against the dead-letter budget (max deliver).
	budgeted bool
	// status is the class on the wire, in HTTP mode: the function's answer, which Knative and
	// the forwarder act on (Knative retries 5xx, 408 and 429 and gives up on other 4xx).
	status int
}

// settlements is the one table of what a handler's result means, used by the pull worker, the
// HTTP mode and the forwarder that turns the HTTP answer back into a class (classOfStatus).
var settlements = map[Class]settlement{
	classSucceeded:   {outcome: outcomeSuccess, status: http.StatusOK},
	ClassWaiting:     {outcome: outcomeWaiting, status: http.StatusAccepted},
	ClassRetryable:   {outcome: outcomeRetry, budgeted: true, status: http.StatusInternalServerError},
	ClassUnavailable: {outcome: outcomeRetry, status: http.StatusServiceUnavailable},
	ClassPermanent:   {outcome: outcomeDeadLetter, status: http.StatusUnprocessableEntity},
}

// settle looks err's class up in the table.
func settle(err error) (Class, settlement) {
	if err == nil {
		return classSucceeded, settlements[classSucceeded]
	}
	class := ClassOf(err)
	return class, settlements[class]
}

// classOfStatus is the inverse of the table's status column, for any answer an HTTP function
// or whatever stands in its place gives: other 2xx succeeded, 429 is unavailable (throttled),
// 408 and other 5xx retryable, other 4xx permanent.
func classOfStatus(code int) Class {
	switch {
	case code == http.StatusAccepted:
		return ClassWaiting
	case code >= 200 && code < 300:
		return classSucceeded
	case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
		return ClassUnavailable
	case code == http.StatusRequestTimeout || code >= 500:
		return ClassRetryable
	default:
		return ClassPermanent
	}
}

// errorOfAnswer is the handler error an HTTP function's answer stands for (nil for success),
// with its reason and any Retry-After.
func errorOfAnswer(code int, retryAfter, reason, url string) error {
	class := classOfStatus(code)
	if class == classSucceeded {
		return nil
	}
	e := &Error{Class: class, Err: fmt.Errorf("function at %s answered %d: %s", url, code, reason)}
	if s, err := strconv.Atoi(retryAfter); err == nil && s > 0 && settlements[class].outcome == outcomeRetry {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
