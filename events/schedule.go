package events

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TTLNever is the Nats-TTL of every schedule holder. A holder is a message like any other to
// the stream's limits: a MaxAge shorter than the time to its fire would remove it, and the
// server would never fire it (ADR-51: a schedule removed "by any mechanism" stops). A message
// whose TTL is "never" is exempt from MaxAge (nats-server skips it when it expires messages by
// age), so a purge due in a year outlives a stream that keeps events for days. A holder still
// goes: when it fires (an "@at" purges itself), when it is replaced (the server rolls its
// subject up) or removed (Nats-Schedule-Next: purge). The scheduler drops Nats-TTL from the
// copy it fires, which lives for the stream's MaxAge or its Nats-Schedule-TTL.
const TTLNever = "never"

// Schedule makes msg the schedule holder on subject holder, which the server fires as a copy
// of msg onto msg's own subject, and which no stream limit housekeeper allows removes before it
// fires (TTLNever; CheckScheduleSafe). The options returned name that target; the caller adds
// when (jetstream.WithScheduleAt, WithScheduleCron) and how long the copy lives.
func Schedule(msg *nats.Msg, holder string) []jetstream.PublishOpt {
	target := msg.Subject
	msg.Subject = holder
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(jetstream.MsgTTLHeader, TTLNever)
	return []jetstream.PublishOpt{jetstream.WithScheduleTarget(target)}
}
