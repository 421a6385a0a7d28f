package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// DueMessageTTL bounds how long a fired backup-due message stays in the stream: a fire
// nobody handled by then is skipped (the next one comes), and a frequent schedule does not
// fill the stream of record.
const DueMessageTTL = 24 * time.Hour

// ScheduleDefinition declares the schedule function.
var ScheduleDefinition = runner.Definition{
	Name: "schedule",
	// Every change of a config.
	Types: []string{
		events.TypeEtcdBackupConfigCreated, events.TypeEtcdBackupConfigUpdated,
		events.TypeEtcdBackupConfigDeleting, events.TypeEtcdBackupConfigSynced,
	},
	// The configs' schedules and their removal.
	Publishes: []string{events.SubjectEtcdBackupSchedules, events.SubjectEtcdBackupUnschedules},
	Bind: runner.NoFlags(func(_ context.Context, d runner.Deps) (runner.Handler, error) {
		return &Scheduler{Client: d.Client, JetStream: d.JetStream, Cluster: d.Cluster, Log: d.Log, Now: time.Now}, nil
	}),
}

// Scheduler keeps each config's schedule on the NATS server in line with the config.
type Scheduler struct {
	Client    client.Client
	JetStream jetstream.JetStream
	Cluster   string
	Log       *zap.Logger
	Now       func() time.Time
}

// Handle converges the live config's schedule: installed (replaced) while the config lives,
// purged when it is deleted, then the finalizer released.
func (s *Scheduler) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return err
	}
	namespace, name := events.SplitObjectName(ref.Name)
	if namespace == "" {
		return runner.Permanentf("event names %q, not <namespace>/<name>", ref.Name)
	}
	cfg := &backupv1alpha1.EtcdBackupConfig{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return s.unschedule(ctx, namespace, name) // gone without us: make sure no schedule is left
		}
		return err
	}
	if cfg.DeletionTimestamp != nil {
		return s.release(ctx, cfg)
	}
	if !controllerutil.ContainsFinalizer(cfg, backupv1alpha1.Finalizer) {
		patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(cfg, backupv1alpha1.Finalizer)
		if err := s.Client.Patch(ctx, cfg, patch); err != nil {
			return fmt.Errorf("adding finalizer: %w", err)
		}
	}
	if cfg.Spec.Schedule == "" && scheduledAt(cfg) {
		return nil // a one-off backup of this generation was scheduled already
	}
	installed, err := s.install(ctx, cfg)
	if err != nil {
		return err
	}
	return updateStatus(ctx, s.Client, client.ObjectKeyFromObject(cfg), func(c *backupv1alpha1.EtcdBackupConfig) {
		if c.Generation != cfg.Generation {
			return // changed meanwhile: its own event installs it
		}
		c.Status.ObservedGeneration = cfg.Generation
		switch {
		case installed != nil:
			setCondition(c, backupv1alpha1.ConditionScheduled, false, backupv1alpha1.ReasonInvalidSchedule, installed.Error())
		case c.Spec.Schedule == "":
			setCondition(c, backupv1alpha1.ConditionScheduled, true, backupv1alpha1.ReasonScheduleInstalled, "One backup, now")
		default:
			setCondition(c, backupv1alpha1.ConditionScheduled, true, backupv1alpha1.ReasonScheduleInstalled,
				fmt.Sprintf("Schedule %q%s installed on the NATS server", c.Spec.Schedule, inZone(c.Spec.TimeZone)))
		}
	})
}

// scheduledAt reports whether cfg's schedule was installed for its current generation.
func scheduledAt(cfg *backupv1alpha1.EtcdBackupConfig) bool {
	c := meta.FindStatusCondition(cfg.Status.Conditions, backupv1alpha1.ConditionScheduled)
	return c != nil && c.ObservedGeneration == cfg.Generation && c.Status == "True"
}

func inZone(tz string) string {
	if tz == "" {
		return ""
	}
	return " in " + tz
}

// install publishes cfg's schedule on its schedule subject, replacing the one there. The
// server validates the schedule: one it refuses is returned as the first result, to be
// reported, not retried.
func (s *Scheduler) install(ctx context.Context, cfg *backupv1alpha1.EtcdBackupConfig) (refused error, err error) {
	due, err := events.NewEtcdBackupDueEvent(s.Cluster, kube.Ref(events.KindEtcdBackupConfig, cfg), cfg.Spec.Schedule, s.Now())
	if err != nil {
		return nil, err
	}
	msg, err := events.Encode(due)
	if err != nil {
		return nil, err
	}
	opts := append(events.Schedule(msg, events.EtcdBackupScheduleSubject(cfg.Namespace, cfg.Name)), jetstream.WithScheduleTTL(DueMessageTTL))
	switch {
	case cfg.Spec.Schedule == "":
		// Once, now: the scheduler's whole seconds make it within a second or two.
		opts = append(opts, jetstream.WithScheduleAt(s.Now().Add(time.Second)))
	default:
		opts = append(opts, jetstream.WithScheduleCron(cfg.Spec.Schedule))
		if cfg.Spec.TimeZone != "" {
			opts = append(opts, jetstream.WithScheduleTimeZone(cfg.Spec.TimeZone))
		}
	}
	_, err = s.JetStream.PublishMsg(ctx, msg, opts...)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		s.Log.Info("schedule installed", zap.String("config", events.ObjectName(cfg.Namespace, cfg.Name)), zap.String("schedule", cfg.Spec.Schedule),
			zap.String("timeZone", cfg.Spec.TimeZone), zap.Int64("generation", cfg.Generation))
		return nil, nil
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusBadRequest:
		return fmt.Errorf("the NATS server refuses schedule %q%s: %s", cfg.Spec.Schedule, inZone(cfg.Spec.TimeZone), apiErr.Description), nil
	default:
		return nil, fmt.Errorf("installing the schedule of %s: %w", events.ObjectName(cfg.Namespace, cfg.Name), err)
	}
}

// unschedule removes the config's schedule: no further fires. It asks the server to purge the
// schedule subject with a message on the config's unschedule subject (headers Nats-Scheduler and
// Nats-Schedule-Next: purge), which needs only a publish right, not the right to purge the
// stream of record. Idempotent: a subject without a schedule is left as it is.
func (s *Scheduler) unschedule(ctx context.Context, namespace, name string) error {
	msg := nats.NewMsg(events.EtcdBackupUnscheduleSubject(namespace, name))
	msg.Header.Set(jetstream.SchedulerHeader, events.EtcdBackupScheduleSubject(namespace, name))
	msg.Header.Set(jetstream.ScheduleNextHeader, "purge")
	if _, err := s.JetStream.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("removing the schedule of %s/%s: %w", namespace, name, err)
	}
	return nil
}

// release removes the schedule, then the finalizer.
func (s *Scheduler) release(ctx context.Context, cfg *backupv1alpha1.EtcdBackupConfig) error {
	if !slices.Contains(cfg.Finalizers, backupv1alpha1.Finalizer) {
		return nil
	}
	if err := s.unschedule(ctx, cfg.Namespace, cfg.Name); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(cfg, backupv1alpha1.Finalizer)
	if err := s.Client.Patch(ctx, cfg, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	s.Log.Info("schedule removed", zap.String("config", events.ObjectName(cfg.Namespace, cfg.Name)))
	return nil
}
