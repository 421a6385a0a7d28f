package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names.
const (
	// RecordStream is the stream of record: every event, kept for days so it can be replayed.
	// Limits retention only: work-queue or interest retention would delete on ack.
	RecordStream = "HOUSEKEEPER"
	// DeadLetterStream keeps events a function could never handle, each with its reason.
	DeadLetterStream = "HOUSEKEEPER_DEADLETTER"
)

// Stream defaults.
const (
	DefaultMaxAge = 14 * 24 * time.Hour
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values: long enough to cover a
	// bridge restart and relist.
	DuplicateWindow         = 10 * time.Minute
	DefaultDeadLetterMaxAge = 30 * 24 * time.Hour
)

// StreamConfigs returns the configurations of the stream of record and the dead-letter stream.
func StreamConfigs(opts ...StreamOption) (record, deadLetter jetstream.StreamConfig) {
	o := streamOptions{maxAge: DefaultMaxAge, deadLetterMaxAge: DefaultDeadLetterMaxAge, replicas: 1, storage: jetstream.FileStorage}
	for _, opt := range opts {
		opt(&o)
	}
	duplicates := DuplicateWindow
	if o.maxAge < duplicates {
		duplicates = o.maxAge
	}
	record = jetstream.StreamConfig{
		Name:              RecordStream,
		Description:       "housekeeper: BackupBucket, BackupEntry and purge events (stream of record)",
		Subjects:          []string{SubjectAll},
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            o.maxAge,
		Duplicates:        duplicates,
		Storage:           o.storage,
		Replicas:          o.replicas,
		AllowMsgSchedules: true,
		AllowMsgTTL:       true,
		// Purging a schedule subject cancels a pending purge; nothing else is purged.
		DenyPurge: false,
	}
	deadLetter = jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "housekeeper: events functions could not handle, with the reason",
		Subjects:    []string{SubjectDeadLetters},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      o.deadLetterMaxAge,
		// Dead letters are published with the id function/sequence: one per original event.
		Duplicates: min(DuplicateWindow, o.deadLetterMaxAge),
		Storage:    o.storage,
		Replicas:   o.replicas,
	}
	return record, deadLetter
}

// ErrNotSetUp says that a stream or a consumer housekeeper needs does not exist (or no longer
// fits): `housekeeper setup` creates and updates them, and nothing else does.
var ErrNotSetUp = errors.New("not set up: run `housekeeper setup`")

// EnsureStreams creates the streams or updates them to the wanted configuration: the stream
// part of `housekeeper setup`. A stream that already has the configuration is left alone, so
// running it again changes nothing (an update is a write to the stream, and nats-server 2.15.2
// even races one against a consumer being created, as -race shows).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...StreamOption) error {
	record, deadLetter := StreamConfigs(opts...)
	for _, want := range []jetstream.StreamConfig{record, deadLetter} {
		stream, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_, err = js.CreateOrUpdateStream(ctx, want)
		case err == nil && !sameStreamConfig(stream.CachedInfo().Config, want):
			_, err = js.UpdateStream(ctx, want)
		}
		if err != nil {
			return fmt.Errorf("ensuring stream %s: %w", want.Name, err)
		}
	}
	return nil
}

// CheckStreams reports, as ErrNotSetUp, a stream of housekeeper's that does not exist. Processes
// call it at start-up instead of creating the streams with settings of their own.
func CheckStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, name := range []string{RecordStream, DeadLetterStream} {
		_, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s does not exist: %w", name, ErrNotSetUp)
		}
		if err != nil {
			return fmt.Errorf("looking up stream %s: %w", name, err)
		}
	}
	return nil
}

// sameStreamConfig compares the settings StreamConfigs makes; the server fills in the rest.
func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Description == want.Description &&
		have.Retention == want.Retention && have.MaxAge == want.MaxAge && have.Duplicates == want.Duplicates &&
		have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.AllowMsgSchedules == want.AllowMsgSchedules && have.AllowMsgTTL == want.AllowMsgTTL
}
