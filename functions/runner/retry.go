package runner

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
)

// attempts is how often the event in msg has been tried, this delivery included: the
// deliveries of earlier copies (events.HeaderAttempts) plus this copy's.
func attempts(msg jetstream.Msg, meta *jetstream.MsgMetadata) uint64 {
	earlier, _ := strconv.ParseUint(msg.Headers().Get(events.HeaderAttempts), 10, 64)
	return earlier + meta.NumDelivered
}

// failingSince is when the event first failed for a cause that counts against the retry budget
// (events.HeaderFailingSince); zero if none has.
func failingSince(msg jetstream.Msg) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, msg.Headers().Get(events.HeaderFailingSince))
	return t
}

// waitingSinceOf is when the event first failed because a dependency was away
// (events.HeaderWaitingSince); zero if it has not.
func waitingSinceOf(msg jetstream.Msg) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, msg.Headers().Get(events.HeaderWaitingSince))
	return t
}

// scheduleRetry hands a failed event to the NATS server, which delivers a copy to this
// function's redrive subject after delay; the caller then acknowledges the original. A
// NAK with delay would do the same while holding one of the consumer's max-ack-pending slots
// for the whole delay: enough failing events would starve every other one.
func (w *Worker) scheduleRetry(ctx context.Context, msg jetstream.Msg, tried uint64, failingSince, waitingSince time.Time, delay time.Duration) error {
	id := msg.Headers().Get("ce-id")
	if id == "" {
		return fmt.Errorf("event without ce-id")
	}
	retry := redriveMsg(w.fn.Name, msg.Headers(), msg.Data(), fmt.Sprintf("attempt/%s/%d", id, tried))
	retry.Header.Set(events.HeaderAttempts, strconv.FormatUint(tried, 10))
	for header, t := range map[string]time.Time{events.HeaderFailingSince: failingSince, events.HeaderWaitingSince: waitingSince} {
		if !t.IsZero() {
			retry.Header.Set(header, t.UTC().Format(time.RFC3339Nano))
		}
	}
	if f, ok := FireOf(ctx); ok {
		retry.Header.Set(events.HeaderFiredAt, f.At.UTC().Format(time.RFC3339Nano))
	}
	opts := events.Schedule(retry, events.RetryScheduleSubject(w.fn.Name, id))
	// The server's scheduler works in whole seconds: a shorter delay fires within one.
	at := time.Now().Add(max(delay, time.Second))
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := w.js.PublishMsg(pubCtx, retry, append(opts, jetstream.WithScheduleAt(at))...)
	return err
}
