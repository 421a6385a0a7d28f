package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// AuditStream keeps what the functions report they did (IsAudit): no function consumes a
	// report, so it is stored with replicas of its own, one by default.
	AuditStream = "HOUSEKEEPER_AUDIT"
	// RecallConsumer is the leading bridge's consumer of RecordStream, created at the start of
	// its term to read the last event of every object and deleted after.
	RecallConsumer = "housekeeper-bridge-recall"
)

// Stream defaults.
const (
	DefaultMaxAge = 14 * 24 * time.Hour
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values: long enough to cover a
	// bridge restart and relist.
	DuplicateWindow         = 10 * time.Minute
	DefaultDeadLetterMaxAge = 30 * 24 * time.Hour
)

// Streams are the configurations of housekeeper's streams.
type Streams struct {
	Record, DeadLetter, Audit jetstream.StreamConfig
}

// All lists the streams: the stream of record first.
func (s Streams) All() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{s.Record, s.DeadLetter, s.Audit}
}

// StreamConfigs returns the configurations of the stream of record, the dead-letter stream and
// the audit stream.
func StreamConfigs(opts ...StreamOption) Streams {
	o := streamOptions{maxAge: DefaultMaxAge, deadLetterMaxAge: DefaultDeadLetterMaxAge, replicas: 1, auditReplicas: 1, storage: jetstream.FileStorage}
	for _, opt := range opts {
		opt(&o)
	}
	duplicates := DuplicateWindow
	if o.maxAge < duplicates {
		duplicates = o.maxAge
	}
	return Streams{
		Record: jetstream.StreamConfig{
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
		},
		DeadLetter: jetstream.StreamConfig{
			Name:        DeadLetterStream,
			Description: "housekeeper: events functions could not handle, with the reason",
			Subjects:    []string{SubjectDeadLetters},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.deadLetterMaxAge,
			// Dead letters are published with the id function/sequence: one per original event.
			Duplicates: min(DuplicateWindow, o.deadLetterMaxAge),
			Storage:    o.storage,
			Replicas:   o.replicas,
		},
		// Kept as long as the events they report on, so a replayed window has its reports.
		Audit: jetstream.StreamConfig{
			Name:        AuditStream,
			Description: "housekeeper: what the functions report they did (purges scheduled, completed, failed, verified)",
			Subjects:    []string{SubjectAudit},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.maxAge,
			Duplicates:  duplicates,
			Storage:     o.storage,
			Replicas:    o.auditReplicas,
		},
	}
}

// StreamNames are the names of housekeeper's streams, the stream of record first.
var StreamNames = []string{RecordStream, DeadLetterStream, AuditStream}

// StreamOf names the stream that stores subject: the audit stream or the dead-letter stream by
// their roots, the stream of record for every other subject of housekeeper's.
func StreamOf(subject string) string {
	switch {
	case strings.HasPrefix(subject, auditRoot+"."):
		return AuditStream
	case strings.HasPrefix(subject, deadLetterRoot+"."):
		return DeadLetterStream
	}
	return RecordStream
}

// ErrNotSetUp says that a stream or a consumer housekeeper needs does not exist (or no longer
// fits): `housekeeper setup` creates and updates them, and nothing else does.
var ErrNotSetUp = errors.New("not set up: run `housekeeper setup`")

// EnsureStreams creates the streams or updates them to the wanted configuration: the stream
// part of `housekeeper setup`. A stream that already has the configuration is left alone, so
// running it again changes nothing (an update is a write to the stream, and nats-server 2.15.2
// even races one against a consumer being created, as -race shows).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts ...StreamOption) error {
	for _, want := range StreamConfigs(opts...).All() {
		stream, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_, err = js.CreateOrUpdateStream(ctx, want)
		case err == nil:
			have := stream.CachedInfo().Config
			// What an update does not change (limits set by hand, mirrors, sources, a retention
			// the server lets no update change) must already be safe for schedules.
			if want.AllowMsgSchedules {
				if err := CheckScheduleSafe(unmanaged(have, want)); err != nil {
					return fmt.Errorf("refusing to set up: %w", err)
				}
			}
			if !sameStreamConfig(have, want) {
				_, err = js.UpdateStream(ctx, want)
			}
		}
		if err != nil {
			return fmt.Errorf("ensuring stream %s: %w", want.Name, err)
		}
	}
	return nil
}

// CheckStreams reports, as ErrNotSetUp, a stream of housekeeper's that does not exist, and as
// ErrScheduleUnsafe a stream of record whose settings can remove a pending schedule. Processes
// call it at start-up instead of creating the streams with settings of their own.
func CheckStreams(ctx context.Context, js jetstream.JetStream) error {
	if err := CheckServerVersion(js.Conn().ConnectedServerVersion()); err != nil {
		return err
	}
	for _, name := range StreamNames {
		stream, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s does not exist: %w", name, ErrNotSetUp)
		}
		if err != nil {
			return fmt.Errorf("looking up stream %s: %w", name, err)
		}
		if name == RecordStream {
			if err := CheckScheduleSafe(stream.CachedInfo().Config); err != nil {
				return err
			}
		}
	}
	return nil
}

// MinServerVersion is the oldest nats-server housekeeper runs on: before 2.15, a replicated
// stream could lose pending schedules (nats-server#8423, fixed by #8431).
const MinServerVersion = "2.15.0"

// ErrServerTooOld says that the NATS server is older than MinServerVersion.
var ErrServerTooOld = errors.New("nats-server too old")

// CheckServerVersion returns ErrServerTooOld, naming both versions, for a server version older
// than MinServerVersion, or one that does not read as a version.
func CheckServerVersion(version string) error {
	have, pre, ok := parseVersion(version)
	want, _, _ := parseVersion(MinServerVersion)
	if c := slices.Compare(have, want); ok && (c > 0 || c == 0 && !pre) {
		return nil
	}
	return fmt.Errorf("%w: connected to nats-server %q, housekeeper needs %s or newer (older servers lose schedules of replicated streams, nats-server#8423)",
		ErrServerTooOld, version, MinServerVersion)
}

// parseVersion reads "major.minor.patch" and whether a "-suffix" (a pre-release) follows.
func parseVersion(v string) (version []int, pre bool, ok bool) {
	v, suffix, pre := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 || pre && suffix == "" {
		return nil, false, false
	}
	version = make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false, false
		}
		version[i] = n
	}
	return version, pre, true
}

// ErrScheduleUnsafe says that a stream's settings can remove a pending schedule (a purge, a
// verify purge, a retry, a cron backup) before it fires, and the server would then never fire
// it: nothing would say so.
var ErrScheduleUnsafe = errors.New("stream settings can drop a pending schedule")

// CheckScheduleSafe returns ErrScheduleUnsafe, naming each setting and why, if cfg can remove a
// schedule holder before it fires. MaxAge cannot: every holder is exempt (TTLNever).
func CheckScheduleSafe(cfg jetstream.StreamConfig) error {
	var why []string
	if cfg.Retention != jetstream.LimitsPolicy {
		why = append(why, fmt.Sprintf("retention %s deletes a schedule once acknowledged or without interest (limits only)", cfg.Retention))
	}
	if cfg.Discard == jetstream.DiscardNew {
		why = append(why, "discard new refuses new schedules once the stream is full")
	}
	if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 {
		why = append(why, fmt.Sprintf("max messages %d / max bytes %d evict the oldest messages, pending schedules among them, once reached (leave both unlimited)", cfg.MaxMsgs, cfg.MaxBytes))
	}
	if cfg.Mirror != nil || len(cfg.Sources) > 0 {
		why = append(why, "a mirror or a stream with sources does not fire schedules")
	}
	if !cfg.AllowMsgSchedules {
		why = append(why, "message schedules are not allowed")
	}
	if !cfg.AllowMsgTTL {
		why = append(why, "per-message TTLs are not allowed: a schedule's TTL \"never\" is what keeps it beyond the max age")
	}
	if cfg.DenyPurge {
		why = append(why, "deny purge: a pending purge could not be cancelled")
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("stream %s: %w: %s", cfg.Name, ErrScheduleUnsafe, strings.Join(why, "; "))
}

// unmanaged is have with the settings EnsureStreams sets taken from want: what would remain of
// have after an update, but for its retention, which the server does not let an update change.
func unmanaged(have, want jetstream.StreamConfig) jetstream.StreamConfig {
	have.AllowMsgSchedules, have.AllowMsgTTL, have.DenyPurge = want.AllowMsgSchedules, want.AllowMsgTTL, want.DenyPurge
	return have
}

// sameStreamConfig compares the settings StreamConfigs makes; the server fills in the rest.
func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Description == want.Description &&
		have.Retention == want.Retention && have.MaxAge == want.MaxAge && have.Duplicates == want.Duplicates &&
		have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.AllowMsgSchedules == want.AllowMsgSchedules && have.AllowMsgTTL == want.AllowMsgTTL
}
