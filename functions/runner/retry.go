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

// outagesOf is how many of the event's earlier deliveries failed only because a dependency was
// away (events.HeaderUnavailable): they do not count against the dead-letter budget.
func outagesOf(msg jetstream.Msg) uint64 {
	n, _ := strconv.ParseUint(msg.Headers().Get(events.HeaderUnavailable), 10, 64)
	return n
}

// scheduleRetry hands a failed event to the NATS server, which delivers a copy to this
// function's redrive subject after delay; the caller then acknowledges the original. A
// NAK with delay would do the same while holding one of the consumer's max-ack-pending slots
// for the whole delay: enough failing events would starve every other one.
func (w *Worker) scheduleRetry(ctx context.Context, msg jetstream.Msg, tried, outages uint64, delay time.Duration) error {
	id := msg.Headers().Get("ce-id")
	if id == "" {
		return fmt.Errorf("event without ce-id")
	}
	retry := redriveMsg(w.fn.Name, msg.Headers(), msg.Data(), fmt.Sprintf("attempt/%s/%d", id, tried))
	retry.Header.Set(events.HeaderAttempts, strconv.FormatUint(tried, 10))
	if outages > 0 {
		retry.Header.Set(events.HeaderUnavailable, strconv.FormatUint(outages, 10))
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
