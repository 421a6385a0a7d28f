package runner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Every class has a row, and the HTTP answer of each row reads back as its class: what the
// HTTP mode answers is what the forwarder and the pull worker act on.
func TestOutcomeTableRoundTripsThroughHTTP(t *testing.T) {
	classes := []Class{classSucceeded, ClassWaiting, ClassRetryable, ClassUnavailable, ClassPermanent}
	if len(settlements) != len(classes) {
		t.Fatalf("the table has %d rows, want one per class (%d)", len(settlements), len(classes))
	}
	for _, class := range classes {
		row, ok := settlements[class]
		if !ok {
			t.Fatalf("no row for class %q", class)
		}
		if got := classOfStatus(row.status); got != class {
			t.Errorf("class %q answers %d, which reads back as %q", class, row.status, got)
		}
		err := errorOfAnswer(row.status, "7", "because", "http://fn")
		if got, _ := settle(err); got != class {
			t.Errorf("class %q: the forwarder's error %v settles as %q", class, err, got)
		}
		wantDelay := 7 * time.Second
		if row.outcome != outcomeRetry {
			wantDelay = 0
		}
		if got := retryAfterOf(err); got != wantDelay {
			t.Errorf("class %q: Retry-After 7 gives a delay of %s, want %s", class, got, wantDelay)
		}
	}
	if s := settlements[ClassRetryable]; !s.budgeted {
		t.Error("retryable failures must count against the dead-letter budget")
	}
	if s := settlements[ClassUnavailable]; s.budgeted {
		t.Error("outages must not count against the dead-letter budget")
	}
}

// Answers no housekeeper function gives still read as what Knative would make of them.
func TestForeignAnswersReadAsKnativeReadsThem(t *testing.T) {
	for code, want := range map[int]Class{
		http.StatusNoContent: classSucceeded, http.StatusRequestTimeout: ClassRetryable, http.StatusTooManyRequests: ClassUnavailable,
		http.StatusBadGateway: ClassRetryable, http.StatusGatewayTimeout: ClassRetryable, http.StatusNotFound: ClassPermanent,
		http.StatusBadRequest: ClassPermanent,
	} {
		if got := classOfStatus(code); got != want {
			t.Errorf("%d reads as %q, want %q", code, got, want)
		}
	}
}

func TestOutagesAreUnavailableOtherFailuresKeepTheirClass(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://api:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	badCert := &url.Error{Op: "Get", URL: "https://store", Err: x509.UnknownAuthorityError{}}
	gr := schema.GroupResource{Group: "extensions.gardener.cloud", Resource: "backupentries"}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"connection refused", fmt.Errorf("getting the entry: %w", refused), ClassUnavailable},
		{"explicitly retryable, caused by an outage", Retryable(refused), ClassUnavailable},
		{"throttled store", Retryable(fmt.Errorf("put: %w", objectstore.ErrThrottled)), ClassUnavailable},
		{"API server unavailable", apierrors.NewServiceUnavailable("starting"), ClassUnavailable},
		{"etcd timed out", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), ClassUnavailable},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), ClassUnavailable},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), ClassUnavailable},
		{"a deadline passed", fmt.Errorf("listing: %w", context.DeadlineExceeded), ClassUnavailable},
		{"certificate not trusted", badCert, ClassRetryable},
		{"not found", apierrors.NewNotFound(gr, "x"), ClassRetryable},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), ClassRetryable},
		{"plain", errors.New("still failing"), ClassRetryable},
		{"permanent, though refused", Permanent(refused), ClassPermanent},
		{"waiting, though refused", Waiting(refused), ClassWaiting},
		{"invalid event", fmt.Errorf("%w: no subject", events.ErrInvalidEvent), ClassPermanent},
	} {
		if got := ClassOf(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A store that throttles and says how long to wait is an outage retried after that delay; a
// delay the handler set itself comes first.
func TestThrottledStoresSetTheDelay(t *testing.T) {
	throttled := fmt.Errorf("bucket %q: list: %w", "b", &objectstore.ResponseError{
		Sentinel: &objectstore.ThrottledError{RetryAfter: 20 * time.Second}, Status: http.StatusServiceUnavailable, Code: "SlowDown"})
	for _, tc := range []struct {
		name      string
		err       error
		class     Class
		wantDelay time.Duration
	}{
		{"as the store answered", throttled, ClassUnavailable, 20 * time.Second},
		{"classified retryable", Retryable(throttled), ClassUnavailable, 20 * time.Second},
		{"the handler's own delay", RetryAfter(time.Minute, throttled), ClassUnavailable, time.Minute},
		{"without Retry-After", Retryable(fmt.Errorf("put: %w", objectstore.ErrThrottled)), ClassUnavailable, 0},
	} {
		if got := ClassOf(tc.err); got != tc.class {
			t.Errorf("%s: class %q, want %q", tc.name, got, tc.class)
		}
		if got := retryAfterOf(tc.err); got != tc.wantDelay {
			t.Errorf("%s: delay %s, want %s", tc.name, got, tc.wantDelay)
		}
	}
	w := &Worker{opts: workerOptionsOf(nil)}
	if got := w.backoff(1, throttled); got != 20*time.Second {
		t.Errorf("the worker's backoff for a store asking for 20s: %s", got)
	}
}
