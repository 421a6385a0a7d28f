package events

import "errors"

var (
	// ErrInvalidEvent is wrapped by every decoding and validation error; the wrapping message
	// names what is wrong. Such an event can never succeed: dead-letter it.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrUnknownType means the event type is not one this contract defines.
	ErrUnknownType = errors.New("unknown event type")
	// ErrDataTooLarge means an object's snapshot stays above MaxDataSize even when trimmed.
	ErrDataTooLarge = errors.New("event data too large")
)
