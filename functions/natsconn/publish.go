package natsconn

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Publish retry timing: an attempt waits attemptTimeout for the stream's ack; a failed one is
// retried after a back-off from retryBase doubling to retryMax, jittered.
const (
	attemptTimeout = 5 * time.Second
	retryBase      = 250 * time.Millisecond
	retryMax       = 5 * time.Second
)

// errCodeClusterNotAvailable is nats-server's JSClusterNotAvailErr, "JetStream system
// temporarily unavailable", which nats.go names no constant for.
const errCodeClusterNotAvailable jetstream.ErrorCode = 10008

// NewJetStream is JetStream on nc whose synchronous publishes wait out a leader election: a
// publish nobody answered (the stream has no leader) is retried until it is acknowledged or
// ctx ends, and so is one whose answer never came (its leader died mid-flight) when the message
// carries a Nats-Msg-Id, with which the stream drops a copy it stored already. nats.go retries
// twice, 250 ms apart; an election takes seconds. A waiting period is logged once when it
// begins and once when it ends, with its duration, not once per attempt.
func NewJetStream(nc *nats.Conn, log *zap.Logger) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &failoverJetStream{JetStream: js, log: log}, nil
}

type failoverJetStream struct {
	jetstream.JetStream
	log *zap.Logger

	mu sync.Mutex
	// waitingSince is when publishes began to wait; zero while they are answered.
	waitingSince time.Time
	failed       int
}

func (j *failoverJetStream) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return j.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, opts...)
}

func (j *failoverJetStream) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	delay := retryBase
	var unanswered error // the last error of an attempt, for when ctx ends the wait
	for {
		attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
		ack, err := j.JetStream.PublishMsg(attempt, msg, opts...)
		cancel()
		if err == nil {
			j.answered()
			return ack, nil
		}
		if ctx.Err() != nil {
			return nil, cmp.Or(unanswered, err)
		}
		if !retryable(err, msg) {
			return nil, err
		}
		unanswered = err
		j.unanswered(msg.Subject, err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(jitter(delay)):
		}
		delay = min(2*delay, retryMax)
	}
}

// retryable says a publish that failed with err can be sent again without a second copy: no
// stream answered (no leader), or the answer did not come and the message has an id.
func retryable(err error, msg *nats.Msg) bool {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeClusterNotAvailable {
		return true
	}
	unknown := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
	return unknown && msg.Header.Get(nats.MsgIdHdr) != ""
}

func (j *failoverJetStream) unanswered(subject string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failed++
	if !j.waitingSince.IsZero() {
		return
	}
	j.waitingSince = time.Now()
	j.log.Warn("JetStream does not acknowledge publishes (a leader election?); they wait and are retried with their message ids",
		zap.String("subject", subject), zap.Error(err))
}

func (j *failoverJetStream) answered() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.waitingSince.IsZero() {
		return
	}
	j.log.Info("JetStream acknowledges publishes again",
		zap.Duration("waited", time.Since(j.waitingSince).Round(time.Millisecond)), zap.Int("failed_attempts", j.failed))
	j.waitingSince, j.failed = time.Time{}, 0
}

// jitter spreads d by ±20 %, so that waiting publishers do not retry in step.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
