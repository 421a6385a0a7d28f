package natsconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// emptyFetches bounds the fetches in a row that bring nothing while the consumer says messages
// are pending. In a cluster the server a reader is connected to may not yet have learnt of a
// just-created consumer's interest (and each Fetch of an ordered consumer creates one anew): it
// answers "no responders". The next Fetch starts again after the last message read.
const emptyFetches = 5

// ReadPending hands each message pending on cons, fetched size at a time, to each until none is
// pending or each says it has read enough. A consumer that acknowledges must be acknowledged by
// each.
func ReadPending(ctx context.Context, cons jetstream.Consumer, size int, each func(jetstream.Msg) (more bool, err error)) error {
	for empty := 0; ; {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending == 0 {
			return nil
		}
		batch, err := cons.Fetch(int(min(info.NumPending, uint64(size))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if more, err := each(msg); err != nil || !more {
				return err
			}
		}
		err = batch.Error()
		if err == nil && n > 0 {
			empty = 0
			continue
		}
		if err == nil {
			err = jetstream.ErrNoMessages
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if empty++; empty == emptyFetches {
			return fmt.Errorf("%d fetches in a row brought none of %d pending messages: %w", empty, info.NumPending, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(empty) * 100 * time.Millisecond):
		}
	}
}
