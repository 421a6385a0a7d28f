package events

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStreamConfigs(t *testing.T) {
	streams := StreamConfigs()
	record, dl, audit := streams.Record, streams.DeadLetter, streams.Audit
	if record.Name != "HOUSEKEEPER" || !slices.Equal(record.Subjects, []string{"housekeeper.>"}) ||
		record.Retention != jetstream.LimitsPolicy || record.MaxAge != 14*24*time.Hour ||
		record.Duplicates != 10*time.Minute || !record.AllowMsgSchedules || !record.AllowMsgTTL ||
		record.DenyPurge || record.Storage != jetstream.FileStorage || record.Replicas != 1 {
		t.Errorf("record stream %+v", record)
	}
	if dl.Name != "HOUSEKEEPER_DEADLETTER" || !slices.Equal(dl.Subjects, []string{"housekeeper-deadletter.>"}) ||
		dl.Retention != jetstream.LimitsPolicy || dl.MaxAge != 30*24*time.Hour || dl.Storage != jetstream.FileStorage ||
		dl.Duplicates != 10*time.Minute { // as events/README.md says

		t.Errorf("dead-letter stream %+v", dl)
	}
	if audit.Name != "HOUSEKEEPER_AUDIT" || !slices.Equal(audit.Subjects, []string{"housekeeper-audit.>"}) ||
		audit.Retention != jetstream.LimitsPolicy || audit.MaxAge != 14*24*time.Hour || audit.Storage != jetstream.FileStorage ||
		audit.Duplicates != 10*time.Minute || audit.Replicas != 1 || audit.AllowMsgSchedules {
		t.Errorf("audit stream %+v", audit)
	}

	streams = StreamConfigs(WithMaxAge(2*time.Minute), WithDeadLetterMaxAge(time.Hour), WithReplicas(3), WithMemoryStorage())
	record, dl, audit = streams.Record, streams.DeadLetter, streams.Audit
	if record.MaxAge != 2*time.Minute || dl.MaxAge != time.Hour || audit.MaxAge != 2*time.Minute || record.Replicas != 3 || dl.Replicas != 3 ||
		record.Storage != jetstream.MemoryStorage || dl.Storage != jetstream.MemoryStorage || audit.Storage != jetstream.MemoryStorage {
		t.Errorf("options not applied: %+v, %+v, %+v", record, dl, audit)
	}
	// The audit stream's replicas are its own: a report is never what a function needs.
	if audit.Replicas != 1 {
		t.Errorf("audit replicas %d with stream replicas 3, want its own default 1", audit.Replicas)
	}
	if a := StreamConfigs(WithReplicas(3), WithAuditReplicas(3)).Audit; a.Replicas != 3 {
		t.Errorf("audit replicas %d, want 3", a.Replicas)
	}
	// JetStream refuses a duplicate window longer than the max age.
	if record.Duplicates != 2*time.Minute {
		t.Errorf("duplicate window %s with max age 2m, want 2m", record.Duplicates)
	}
	if dl = StreamConfigs(WithDeadLetterMaxAge(time.Minute)).DeadLetter; dl.Duplicates != time.Minute {
		t.Errorf("dead-letter duplicate window %s with max age 1m, want 1m", dl.Duplicates)
	}
}

func TestCheckServerVersion(t *testing.T) {
	for version, ok := range map[string]bool{
		"2.15.0": true, "2.15.2": true, "2.16.0-dev": true, "v2.15.2": true, "3.0.0": true,
		"2.14.5": false, "2.12.15": false, "2.15.0-beta.1": false, "": false, "2.15": false, "two": false,
	} {
		err := CheckServerVersion(version)
		if ok != (err == nil) {
			t.Errorf("%q: %v", version, err)
		}
		if err != nil && (!errors.Is(err, ErrServerTooOld) || !strings.Contains(err.Error(), fmt.Sprintf("%q", version)) || !strings.Contains(err.Error(), MinServerVersion)) {
			t.Errorf("%q: the error names neither version: %v", version, err)
		}
	}
}

// The settings StreamConfigs makes are safe for schedules, at any max age; each setting that can
// remove a pending schedule is named.
func TestCheckScheduleSafe(t *testing.T) {
	record := StreamConfigs(WithMaxAge(time.Second)).Record
	if err := CheckScheduleSafe(record); err != nil {
		t.Fatalf("the stream of record: %v", err)
	}
	for want, change := range map[string]func(*jetstream.StreamConfig){
		"retention WorkQueue": func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy },
		"retention Interest":  func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy },
		"discard new":         func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardNew },
		"max messages 1000":   func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 },
		"max bytes 4096":      func(c *jetstream.StreamConfig) { c.MaxBytes = 4096 },
		"a mirror":            func(c *jetstream.StreamConfig) { c.Mirror = &jetstream.StreamSource{Name: "X"} },
		"or a stream with sources": func(c *jetstream.StreamConfig) {
			c.Sources = []*jetstream.StreamSource{{Name: "X"}}
		},
		"schedules are not allowed": func(c *jetstream.StreamConfig) { c.AllowMsgSchedules = false },
		"TTLs are not allowed":      func(c *jetstream.StreamConfig) { c.AllowMsgTTL = false },
		"deny purge":                func(c *jetstream.StreamConfig) { c.DenyPurge = true },
	} {
		cfg := record
		change(&cfg)
		err := CheckScheduleSafe(cfg)
		if !errors.Is(err, ErrScheduleUnsafe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
