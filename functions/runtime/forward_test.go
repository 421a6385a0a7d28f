package runtime

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

	for name, want := range map[string]Class{"ok": "", "waiting": "", "permanent": ClassPermanent, "retryable": ClassRetryable} {
		err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, name, 1))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want success", name, err)
		case want != "" && (err == nil || ClassOf(err) != want):
			t.Errorf("%s: %v (class %s), want %s", name, err, ClassOf(err), want)
		}
	}
	err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, "permanent", 1))
	if !strings.Contains(err.Error(), "not a valid container name") {
		t.Errorf("the function's reason is lost: %v", err)
	}
	srv.Close()
	if err := f.Handle(context.Background(), bucketEvent(t, events.OpCreated, "ok", 1)); err == nil || ClassOf(err) != ClassRetryable {
		t.Errorf("unreachable function: %v, want a retryable error", err)
	}
}
