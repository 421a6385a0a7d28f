package events

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStreamConfigs(t *testing.T) {
	record, dl := StreamConfigs()
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

	record, dl = StreamConfigs(WithMaxAge(2*time.Minute), WithDeadLetterMaxAge(time.Hour), WithReplicas(3), WithMemoryStorage())
	if record.MaxAge != 2*time.Minute || dl.MaxAge != time.Hour || record.Replicas != 3 || dl.Replicas != 3 ||
		record.Storage != jetstream.MemoryStorage || dl.Storage != jetstream.MemoryStorage {
		t.Errorf("options not applied: %+v, %+v", record, dl)
	}
	// JetStream refuses a duplicate window longer than the max age.
	if record.Duplicates != 2*time.Minute {
		t.Errorf("duplicate window %s with max age 2m, want 2m", record.Duplicates)
	}
	if _, dl = StreamConfigs(WithDeadLetterMaxAge(time.Minute)); dl.Duplicates != time.Minute {
		t.Errorf("dead-letter duplicate window %s with max age 1m, want 1m", dl.Duplicates)
	}
}
