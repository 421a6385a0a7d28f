package runner

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Headers the NATS server's scheduler sets on the messages it fires.
const (
	headerScheduler    = "Nats-Scheduler"
	headerScheduleNext = "Nats-Schedule-Next"
)

// MaxFireSkew is how far a fire time may lie ahead of a function's clock (the NATS server's
// clock and ours may differ a little). The scheduler never fires early: a function whose work is
// dated by its fire refuses a fire further ahead.
const MaxFireSkew = time.Minute

// Fire describes the schedule firing that produced the event being handled.
type Fire struct {
	// At is when the schedule fired (the fired message's stream time, to the second; the
	// scheduler fires on whole seconds). Redeliveries and retries of the message carry the
	// same At.
	At time.Time
	// Next is when the schedule fires next, as the server announced it; zero for a schedule
	// that fires once, and for retries.
	Next time.Time
}

type fireKey struct{}

// FireOf returns the fire that produced the event a handler runs for, if a schedule on the
// NATS server produced it (pull mode).
func FireOf(ctx context.Context) (Fire, bool) {
	f, ok := ctx.Value(fireKey{}).(Fire)
	return f, ok
}

// DatedFire is the fire a handler's work is dated by: FireOf(ctx), or a fire at now (to the
// second) when no schedule produced the event (HTTP mode, or replayed by hand: the run is its
// own fire). A fire more than MaxFireSkew ahead of now is no fire of a schedule (the scheduler
// never fires early) and is refused as permanent, naming what the event said was due.
func DatedFire(ctx context.Context, now time.Time, due string) (Fire, error) {
	fire, fired := FireOf(ctx)
	if !fired {
		fire = Fire{At: now.UTC().Truncate(time.Second)}
	}
	if ahead := fire.At.Sub(now); ahead > MaxFireSkew {
		return Fire{}, Permanentf("%s fired at %s, %s in the future: not a fire of its schedule", due,
			fire.At.Format(time.RFC3339), ahead.Round(time.Second))
	}
	return fire, nil
}

// WithFire returns ctx carrying f, as the worker passes it to handlers (and tests may).
func WithFire(ctx context.Context, f Fire) context.Context {
	return context.WithValue(ctx, fireKey{}, f)
}

// fireOf reads the fire from a delivered message: from events.HeaderFiredAt if an earlier copy set
// it, else from the scheduler's headers and the message's stream time.
func fireOf(h nats.Header, meta *jetstream.MsgMetadata) (Fire, bool) {
	if at, err := time.Parse(time.RFC3339Nano, h.Get(events.HeaderFiredAt)); err == nil {
		return Fire{At: at}, true
	}
	if h.Get(headerScheduler) == "" || meta == nil {
		return Fire{}, false
	}
	f := Fire{At: meta.Timestamp.UTC().Truncate(time.Second)}
	if next, err := time.Parse(time.RFC3339Nano, h.Get(headerScheduleNext)); err == nil {
		f.Next = next.UTC()
	}
	return f, true
}

// setFireHeaders writes f for a function in HTTP mode.
func setFireHeaders(h http.Header, f Fire) {
	h.Set(events.HeaderFiredAt, f.At.UTC().Format(time.RFC3339Nano))
	if !f.Next.IsZero() {
		h.Set(events.HeaderFireNext, f.Next.UTC().Format(time.RFC3339Nano))
	}
}

// fireFromHeaders reads what setFireHeaders wrote.
func fireFromHeaders(h http.Header) (Fire, bool) {
	at, err := time.Parse(time.RFC3339Nano, h.Get(events.HeaderFiredAt))
	if err != nil {
		return Fire{}, false
	}
	f := Fire{At: at.UTC()}
	if next, err := time.Parse(time.RFC3339Nano, h.Get(events.HeaderFireNext)); err == nil {
		f.Next = next.UTC()
	}
	return f, true
}
