package events

// Headers housekeeper sets on messages besides the CloudEvents ce-* headers and JetStream's
// Nats-* headers. Every one is part of the wire contract (events/README, "Headers").
const (
	// HeaderAttempts counts the deliveries of an event before its retry was scheduled, so a
	// retried event's attempts add up across retries.
	HeaderAttempts = "Housekeeper-Attempts"
	// HeaderFailingSince is when the event first failed for a cause that counts against the
	// retry budget (RFC 3339), kept on its retries: the budget is a time, not a count. Failures
	// because a dependency was away (an API server, an object store, NATS) never count, so an
	// outage of any length dead-letters nothing.
	HeaderFailingSince = "Housekeeper-Failing-Since"
	// HeaderWaitingSince is when the event first failed because a dependency was away (RFC
	// 3339), kept on its retries while it waits: how long work waits on an outage.
	HeaderWaitingSince = "Housekeeper-Waiting-Since"
	// HeaderFiredAt is when a schedule fired the event (RFC 3339), kept on its retries so a
	// retried fire is the same fire; HeaderFireNext is the schedule's next fire, when known.
	HeaderFiredAt  = "Housekeeper-Fired-At"
	HeaderFireNext = "Housekeeper-Fire-Next"

	// A dead letter carries the original's headers and these: the function that gave up, why,
	// where the original is in the stream of record, how often it was delivered, and when.
	HeaderFunction       = "Housekeeper-Function"
	HeaderReason         = "Housekeeper-Reason"
	HeaderSubject        = "Housekeeper-Subject"
	HeaderStreamSequence = "Housekeeper-Stream-Sequence"
	HeaderDeliveries     = "Housekeeper-Deliveries"
	HeaderFailedAt       = "Housekeeper-Failed-At"
	// HeaderCause says whether a dead letter's cause was transient (the retry budget ran out:
	// the bridge re-drives it) or permanent (the event can never succeed as it is, or every
	// worker that took it crashed or hung: it waits for an operator).
	HeaderCause = "Housekeeper-Cause"
)

// Values of HeaderCause.
const (
	CauseTransient = "transient"
	CausePermanent = "permanent"
)

// ResyncReply is the bridge's answer on SubjectResync: how many objects it queued to be
// announced again.
type ResyncReply struct {
	Queued int `json:"queued"`
}
