package bridge

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A period of failed publishes is two log lines however many attempts fail: one when it
// begins (with what waits and the error) and one when it ends (how long, how many attempts).
func TestPublishOutageIsLoggedOnceEachWay(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	var o outage
	pending := func() int { return 42 }
	noResponders := errors.New("nats: no responders available for request")
	for range 213 {
		o.observe(log, noResponders, pending)
	}
	o.observe(log, context.Canceled, pending) // a shutdown is no outage
	o.observe(log, nil, pending)
	o.observe(log, nil, pending)

	entries := logs.AllUntimed()
	if len(entries) != 2 {
		t.Fatalf("%d log lines for 213 failed publishes and a recovery, want 2: %v", len(entries), entries)
	}
	begin, end := entries[0], entries[1]
	if begin.Level != zap.WarnLevel || begin.ContextMap()["pending"] != int64(42) || begin.ContextMap()["error"] == nil {
		t.Errorf("first line %q %v: want a warning with pending and the error", begin.Message, begin.ContextMap())
	}
	if end.Level != zap.InfoLevel || end.ContextMap()["failed_attempts"] != int64(213) || end.ContextMap()["failed_for"] == nil {
		t.Errorf("second line %q %v: want the recovery with 213 failed attempts and the duration", end.Message, end.ContextMap())
	}
}
