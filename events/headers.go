package events

// Headers housekeeper sets on messages besides the CloudEvents ce-* headers and JetStream's
// Nats-* headers. Every one is part of the wire contract (events/README, "Headers").
const (
	// HeaderAttempts counts the deliveries of an event before its retry was scheduled, so a
	// retried event's attempts add up across retries.
	HeaderAttempts = "Housekeeper-Attempts"
	// HeaderUnavailable counts those of the attempts that failed only because a dependency was
	// away (an API server, an object store, NATS): they do not count against the dead-letter
	// budget, so an outage of any length dead-letters nothing.
	HeaderUnavailable = "Housekeeper-Unavailable"
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
)

// ResyncReply is the bridge's answer on SubjectResync: how many objects it queued to be
// announced again.
type ResyncReply struct {
	Queued int `json:"queued"`
}
