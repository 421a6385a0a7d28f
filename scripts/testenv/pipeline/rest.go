package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Stored is a message as JetStream stored it: its event id, subject and stream sequence.
type Stored struct {
	ID, Subject string
	Seq         uint64
}

// PublishNew publishes msg as the test and fails the test if JetStream drops it as a
// duplicate (a test that means to deliver something new must not be deduplicated away).
func (p *Pipeline) PublishNew(msg *nats.Msg) Stored {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := p.JS.PublishMsg(ctx, msg)
	if err != nil {
		p.T.Fatalf("publishing on %s: %v", msg.Subject, err)
	}
	if ack.Duplicate {
		p.T.Fatalf("JetStream dropped the message on %s as a duplicate", msg.Subject)
	}
	return Stored{ID: msg.Header.Get("ce-id"), Subject: msg.Subject, Seq: ack.Sequence}
}

// AtRest waits until function's consumer is at rest — nothing pending or unacknowledged, no
// retry of the function waiting on the server, and the delivered stream sequence the same in
// two samples 3 s apart — and returns its info then. A consumer that keeps working for two
// minutes (a hot loop) is an error.
func (p *Pipeline) AtRest(function string) (*jetstream.ConsumerInfo, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		first, err := p.consumerInfo(function)
		if err != nil {
			return nil, err
		}
		time.Sleep(3 * time.Second)
		second, err := p.consumerInfo(function)
		if err != nil {
			return nil, err
		}
		retrying, err := p.retryWaiting(function)
		if err != nil {
			return nil, err
		}
		if second.NumPending == 0 && second.NumAckPending == 0 && !retrying && first.Delivered.Stream == second.Delivered.Stream {
			return second, nil
		}
		last = fmt.Sprintf("delivered up to stream sequence %d, 3 s later %d; pending %d, ack pending %d, retry waiting %t",
			first.Delivered.Stream, second.Delivered.Stream, second.NumPending, second.NumAckPending, retrying)
	}
	return nil, fmt.Errorf("consumer %s not at rest after 2 minutes (hot loop?): %s", function, last)
}

func (p *Pipeline) consumerInfo(function string) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.JS.Consumer(ctx, events.RecordStream, function)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// retryWaiting says whether a retry of one of function's events waits on the server.
func (p *Pipeline) retryWaiting(function string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		return false, err
	}
	_, err = stream.GetLastMsgForSubject(ctx, events.RetryScheduleFilter(function))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Acked says whether the consumer whose info (at rest) this is took m and acknowledged it:
// an error names what is missing.
func Acked(info *jetstream.ConsumerInfo, m Stored) error {
	if info == nil {
		return errors.New("the consumer is not at rest: cannot tell whether it took the message")
	}
	if !slices.ContainsFunc(info.Config.FilterSubjects, func(f string) bool { return subjectMatches(f, m.Subject) }) {
		return fmt.Errorf("the message on %s never reaches consumer %s (filters %v)", m.Subject, info.Name, info.Config.FilterSubjects)
	}
	if info.AckFloor.Stream < m.Seq {
		return fmt.Errorf("message %d on %s not handled: consumer %s acknowledged up to stream sequence %d", m.Seq, m.Subject, info.Name, info.AckFloor.Stream)
	}
	return nil
}

// subjectMatches matches a NATS subject against a filter with * and > wildcards.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(f) == len(s)
}
