package entry

import (
	"context"
	"fmt"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// publishPurge publishes the purge event op about the entry be, the one way the entry and the
// purge function publish one. A zero at publishes it now. Otherwise it is a schedule the NATS
// server fires at at (at once if that has passed); there is one schedule per entry:
// publishing again replaces it, and the same schedule twice is a duplicate JetStream drops.
func publishPurge(ctx context.Context, js jetstream.JetStream, cluster string, op events.Operation, be *extensionsv1alpha1.BackupEntry, data events.PurgeData, at, now time.Time) error {
	e, err := events.NewPurgeEvent(cluster, op, kube.Ref(events.KindBackupEntry, be), data, now)
	if err != nil {
		return err
	}
	msg, err := events.Encode(e)
	if err != nil {
		return err
	}
	if at.IsZero() {
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("publishing the %s event of %s: %w", op, data.Entry, err)
		}
		return nil
	}
	opts := events.Schedule(msg, events.PurgeScheduleSubject(data.Entry))
	// Only the server's scheduler fires purge-due events (no identity may publish them), so an
	// event already due is scheduled for now: the scheduler fires it within its timer's floor
	// (250 ms). The time keeps its fraction of a second, which jetstream.WithScheduleAt drops.
	if at.Before(now) {
		at = now
	}
	msg.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
	if _, err := js.PublishMsg(ctx, msg, append(opts, jetstream.WithScheduleTTL(DueMessageTTL))...); err != nil {
		return fmt.Errorf("scheduling the %s purge of %s: %w", op, data.Entry, err)
	}
	return nil
}
