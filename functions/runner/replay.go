package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// Window selects a stretch of the stream of record: from a time or a sequence (inclusive),
// until a time or a sequence (inclusive; zero: up to the last message at the start).
type Window struct {
	Since    time.Time
	FromSeq  uint64
	Until    time.Time
	UntilSeq uint64
}

// ReplayResult says what a replay re-delivered.
type ReplayResult struct {
	Redriven          int
	FirstSeq, LastSeq uint64
}

// Replay re-delivers the events inside w that function's consumer takes to that function
// alone, through its redrive subject: other functions see nothing. The function's types are
// read from its durable consumer, so the function must have run once. progress, if set, is
// called after every event.
func Replay(ctx context.Context, js jetstream.JetStream, function string, w Window, progress func(done int, seq uint64)) (ReplayResult, error) {
	var res ReplayResult
	if w.Since.IsZero() == (w.FromSeq == 0) {
		return res, errors.New("replay needs exactly one start: a time or a sequence")
	}
	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		return res, err
	}
	consumer, err := stream.Consumer(ctx, function)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return res, fmt.Errorf("function %q has no consumer on %s: has it ever run?", function, events.RecordStream)
	}
	if err != nil {
		return res, err
	}
	var filters []string
	for _, s := range consumer.CachedInfo().Config.FilterSubjects {
		if s != events.RedriveSubject(function) { // never replay earlier redrives
			filters = append(filters, s)
		}
	}
	last := stream.CachedInfo().State.LastSeq
	if w.UntilSeq != 0 && w.UntilSeq < last {
		last = w.UntilSeq
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, MaxResetAttempts: orderedResets}
	if w.FromSeq != 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, w.FromSeq
	} else {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &w.Since
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return res, err
	}
	run := nats.NewInbox()[len(nats.InboxPrefix):] // this replay's id: its redrives are new events to JetStream
	err = natsconn.ReadPending(ctx, cons, 256, func(msg jetstream.Msg) (bool, error) {
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		seq := meta.Sequence.Stream
		if seq > last || (!w.Until.IsZero() && meta.Timestamp.After(w.Until)) {
			return false, nil
		}
		id := fmt.Sprintf("replay/%s/%d", run, seq)
		if _, err := js.PublishMsg(ctx, redriveMsg(function, msg.Headers(), msg.Data(), id)); err != nil {
			return false, fmt.Errorf("re-driving sequence %d: %w", seq, err)
		}
		if res.FirstSeq == 0 {
			res.FirstSeq = seq
		}
		res.LastSeq = seq
		res.Redriven++
		if progress != nil {
			progress(res.Redriven, seq)
		}
		return true, nil
	})
	return res, err
}
