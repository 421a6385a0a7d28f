package setup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A cluster that has just elected its meta leader answers "no suitable peers for placement"
// until it has heard from every peer: the setup asks again and says once that it waits; any
// other error ends it at once, and so does its context.
func TestUntilPlaced(t *testing.T) {
	defer func(d time.Duration) { placementRetry = d }(placementRetry)
	placementRetry = time.Millisecond
	noPeers := &jetstream.APIError{Code: 500, ErrorCode: errCodeNoPeers, Description: "no suitable peers for placement, peer offline"}

	core, logs := observer.New(zap.WarnLevel)
	calls := 0
	err := untilPlaced(context.Background(), zap.New(core), func() error {
		if calls++; calls < 3 {
			return noPeers
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("placed on the third try: %v after %d tries", err, calls)
	}
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings while waiting, want 1: %v", n, logs.All())
	}

	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest, Description: "bad request"}
	calls = 0
	if err := untilPlaced(context.Background(), zap.NewNop(), func() error { calls++; return refused }); !errors.Is(err, refused) || calls != 1 {
		t.Errorf("another error: %v after %d tries, want it at once", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := untilPlaced(ctx, zap.NewNop(), func() error { return noPeers }); !errors.As(err, new(*jetstream.APIError)) || ctx.Err() == nil {
		t.Errorf("with the context ended: %v, want the placement error", err)
	}
}
