package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// defaultTimeout is how long an operator's command waits for JetStream to answer before it
// gives up: a leader election takes seconds (nats-server's 4–9 s), a cluster that lost its
// quorum never answers.
const defaultTimeout = 30 * time.Second

// giveUpGrace is how long a command that gave up waits for the work it abandons to return its
// last error, which says more than the silence.
const giveUpGrace = 500 * time.Millisecond

// ErrNoAnswer is what a command ends with when JetStream did not answer within --timeout: a
// stream or consumer without a leader, a cluster without quorum, or no connection to NATS.
// What the command did before is kept; it says how far it got.
var ErrNoAnswer = errors.New("no answer from JetStream")

// errSilent is why a command's context ended: nothing answered for --timeout.
var errSilent = errors.New("JetStream did not answer")

// noAnswerError names what a command waited for, and how long.
type noAnswerError struct {
	what    string
	timeout time.Duration
	err     error // the abandoned work's last error, nil if it had none yet
}

func (e *noAnswerError) Error() string {
	msg := fmt.Sprintf("%s: no answer within %s (a JetStream leader election?)", e.what, e.timeout)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *noAnswerError) Is(target error) bool { return target == ErrNoAnswer }

func (e *noAnswerError) Unwrap() error { return e.err }

// bindTimeout registers --timeout, the bound of every wait of a command that reads JetStream.
func bindTimeout(fs *commandFlags) *time.Duration {
	return fs.Duration("timeout", defaultTimeout,
		"give up once JetStream has not answered for this long (a leader election takes seconds, a cluster without quorum never answers); what was done is kept")
}

// checkTimeout refuses a --timeout that would give up at once.
func checkTimeout(command string, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("%w: %s: --timeout %s must be positive", errUsage, command, timeout)
	}
	return nil
}

// watch runs op and returns once it returns, or once it has not called alive for timeout: then
// with a *noAnswerError naming what, even if op does not return (a nats.go ordered consumer's
// Fetch takes no context). op's context ends then; op is abandoned, and the caller closes the
// connection under it. op's results may be read only when watch returns nil.
func watch(ctx context.Context, timeout time.Duration, what string, op func(ctx context.Context, alive func()) error) error {
	sc, stop := newStallContext(ctx, timeout)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- op(sc, sc.alive) }()
	var err error
	select {
	case err = <-done:
	case <-sc.Done():
		select {
		case err = <-done: // op mostly ends at once on its ended context, with its last error
		case <-time.After(giveUpGrace):
			err = context.Cause(sc)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(sc), errSilent):
		if errors.Is(err, errSilent) || errors.Is(err, context.Canceled) {
			err = nil // says nothing the message does not
		}
		return &noAnswerError{what: what, timeout: timeout, err: err}
	case ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted: %w", what, err)
	}
	return err
}

// stallContext ends once alive was not called for timeout. Its deadline moves with every call,
// so a JetStream request made under it waits as long as the command does, not jetstream's
// default 5 s.
type stallContext struct {
	context.Context
	timeout time.Duration
	timer   *time.Timer

	mu       sync.Mutex
	deadline time.Time
}

func newStallContext(parent context.Context, timeout time.Duration) (*stallContext, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c := &stallContext{Context: ctx, timeout: timeout, deadline: time.Now().Add(timeout)}
	c.timer = time.AfterFunc(timeout, func() { cancel(errSilent) })
	return c, func() { c.timer.Stop(); cancel(nil) }
}

func (c *stallContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// alive says the work made progress: the wait starts again.
func (c *stallContext) alive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Err() != nil {
		return
	}
	c.deadline = time.Now().Add(c.timeout)
	c.timer.Reset(c.timeout)
}
