package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// maxReasonLength keeps a reason within a header's comfortable size.
const maxReasonLength = 2048

// DeadLetter is an event a function gave up on, with why.
type DeadLetter struct {
	// Sequence is the dead letter's sequence in the dead-letter stream.
	Sequence uint64
	Function string
	// Cause is events.CauseTransient (re-driven automatically once its cause may be gone) or
	// events.CausePermanent (waits for an operator).
	Cause  string
	Reason string
	// Subject and StreamSequence locate the original message in the stream of record.
	Subject        string
	StreamSequence uint64
	Deliveries     uint64
	FailedAt       time.Time
	// EventType and EventID are the original event's, when it had them.
	EventType, EventID string

	header nats.Header
	data   []byte
}

// deadLetterMsg builds the dead letter of an original message.
func deadLetterMsg(function, cause, reason, subject string, seq, deliveries uint64, header nats.Header, data []byte) *nats.Msg {
	msg := nats.NewMsg(events.DeadLetterSubject(function))
	for k, v := range header {
		if !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = v
		}
	}
	reason = truncate(reason, maxReasonLength)
	msg.Header.Set(events.HeaderFunction, function)
	msg.Header.Set(events.HeaderCause, cause)
	msg.Header.Set(events.HeaderReason, strings.ReplaceAll(reason, "\n", " "))
	msg.Header.Set(events.HeaderSubject, subject)
	msg.Header.Set(events.HeaderStreamSequence, strconv.FormatUint(seq, 10))
	msg.Header.Set(events.HeaderDeliveries, strconv.FormatUint(deliveries, 10))
	msg.Header.Set(events.HeaderFailedAt, time.Now().UTC().Format(time.RFC3339Nano))
	// One dead letter per function and original message, however often it is reported.
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s/%d", function, seq))
	msg.Data = data
	return msg
}

// orderedResets bounds how often the ordered consumers of the operator's reads (dead letters,
// replay) re-create their server-side consumer in one fetch: nats.go's default is forever,
// with no context to stop it, so a JetStream without a leader would hang them.
const orderedResets = 5

// ListDeadLetters returns the dead letters of function ("" for all), oldest first.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, function string) ([]DeadLetter, error) {
	cfg := jetstream.OrderedConsumerConfig{MaxResetAttempts: orderedResets}
	if function != "" {
		cfg.FilterSubjects = []string{events.DeadLetterSubject(function)}
	}
	cons, err := js.OrderedConsumer(ctx, events.DeadLetterStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", events.DeadLetterStream, err)
	}
	var out []DeadLetter
	err = natsconn.ReadPending(ctx, cons, 256, func(msg jetstream.Msg) (bool, error) {
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		out = append(out, parseDeadLetter(meta.Sequence.Stream, msg.Headers(), msg.Data()))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func parseDeadLetter(seq uint64, h nats.Header, data []byte) DeadLetter {
	d := DeadLetter{
		Sequence:  seq,
		Function:  h.Get(events.HeaderFunction),
		Reason:    h.Get(events.HeaderReason),
		Subject:   h.Get(events.HeaderSubject),
		EventType: h.Get("ce-type"),
		EventID:   h.Get("ce-id"),
		header:    h,
		data:      data,
	}
	d.StreamSequence, _ = strconv.ParseUint(h.Get(events.HeaderStreamSequence), 10, 64)
	d.Deliveries, _ = strconv.ParseUint(h.Get(events.HeaderDeliveries), 10, 64)
	d.FailedAt, _ = time.Parse(time.RFC3339Nano, h.Get(events.HeaderFailedAt))
	d.Cause = causeOf(h.Get(events.HeaderCause), d.Reason)
	return d
}

// causeOf is a dead letter's cause; one stored without it is transient if the function gave
// up after retrying it (a budget of deliveries then), permanent otherwise.
func causeOf(header, reason string) string {
	switch {
	case header != "":
		return header
	case strings.HasPrefix(reason, "gave up after "):
		return events.CauseTransient
	}
	return events.CausePermanent
}

// RedriveTransient re-drives every transient dead letter that failed at least after ago to its
// function, and returns how many it re-drove. Run once the API server and NATS answer again, it
// resolves what an outage, or a failure that outlasted the retry budget, left: a re-driven event
// whose cause is still there is retried as any event is, and comes back only after the budget.
// Permanent dead letters wait for an operator.
func RedriveTransient(ctx context.Context, js jetstream.JetStream, after time.Duration) (int, error) {
	dls, err := ListDeadLetters(ctx, js, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range dls {
		if d.Cause != events.CauseTransient || time.Since(d.FailedAt) < after {
			continue
		}
		if err := RetryDeadLetter(ctx, js, d); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// RetryDeadLetter re-drives d to its function (only to it) and removes it from the
// dead-letter stream once JetStream acknowledged the re-drive.
func RetryDeadLetter(ctx context.Context, js jetstream.JetStream, d DeadLetter) error {
	if d.Function == "" {
		return errors.New("dead letter without a function header cannot be re-driven")
	}
	msg := redriveMsg(d.Function, d.header, d.data, fmt.Sprintf("retry/%d", d.Sequence))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("re-driving dead letter %d: %w", d.Sequence, err)
	}
	if err := DiscardDeadLetter(ctx, js, d.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("removing re-driven dead letter %d: %w", d.Sequence, err)
	}
	return nil
}

// redriveMsg copies an event (its ce-* headers, content type and data) onto the function's
// redrive subject.
func redriveMsg(function string, header nats.Header, data []byte, id string) *nats.Msg {
	msg := nats.NewMsg(events.RedriveSubject(function))
	for k, v := range header {
		if strings.HasPrefix(strings.ToLower(k), "ce-") || strings.EqualFold(k, "content-type") {
			msg.Header[k] = v
		}
	}
	msg.Header.Set(nats.MsgIdHdr, "redrive/"+function+"/"+id)
	msg.Data = data
	return msg
}

// Object is the object the dead letter's event names.
func (d DeadLetter) Object() (events.Ref, error) {
	e, err := events.Decode(d.header, d.data)
	if err != nil {
		return events.Ref{}, err
	}
	return events.RefOf(e)
}

// DiscardDeadLetter removes dead letter seq from the dead-letter stream without re-driving it.
func DiscardDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) error {
	stream, err := js.Stream(ctx, events.DeadLetterStream)
	if err != nil {
		return err
	}
	if err := stream.DeleteMsg(ctx, seq); err != nil {
		return fmt.Errorf("discarding dead letter %d: %w", seq, err)
	}
	return nil
}
