package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/events"
)

// The forwarder and the HTTP mode speak to each other: every class of result survives the
// round trip over real HTTP.
func TestForwarderMapsHTTPModeAnswersBackToClasses(t *testing.T) {
	srv := serveOutcomes(t)
	f := &Forwarder{URL: srv.URL, Client: srv.Client()}

	for name, want := range map[string]Class{"ok": classSucceeded, "waiting": ClassWaiting, "permanent": ClassPermanent,
		"retryable": ClassRetryable, "unavailable": ClassUnavailable} {
		err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, name, 1))
		if got, _ := settle(err); got != want {
			t.Errorf("%s: %v settles as %q, want %q", name, err, got, want)
		}
	}
	err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, "permanent", 1))
	if !strings.Contains(err.Error(), "not a valid container name") {
		t.Errorf("the function's reason is lost: %v", err)
	}
	srv.Close()
	if err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, "ok", 1)); err == nil || ClassOf(err) != ClassUnavailable {
		t.Errorf("unreachable function: %v, want it unavailable", err)
	}
}
