package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// DueMessageTTL bounds how long a fired backup-due, drill-due or copy-due message stays in the
// stream: a fire nobody handled by then is skipped (the next one comes), and a frequent schedule
// does not fill the stream of record.
const DueMessageTTL = 24 * time.Hour

// ScheduleDefinition declares the schedule function.
var ScheduleDefinition = runner.Definition{
	Name:  "schedule",
	Needs: runner.Needs{APIServer: true, Feature: "etcdBackupConfig"},
	// Every change of a config, a drill or a copy policy.
	Types: []string{
		events.TypeEtcdBackupConfigCreated, events.TypeEtcdBackupConfigUpdated,
		events.TypeEtcdBackupConfigDeleting, events.TypeEtcdBackupConfigSynced,
		events.TypeRestoreDrillCreated, events.TypeRestoreDrillUpdated,
		events.TypeRestoreDrillDeleting, events.TypeRestoreDrillSynced,
		events.TypeBackupCopyPolicyCreated, events.TypeBackupCopyPolicyUpdated,
		events.TypeBackupCopyPolicyDeleting, events.TypeBackupCopyPolicySynced,
	},
	// Their schedules and the schedules' removal.
	Publishes: []string{
		events.SubjectEtcdBackupSchedules, events.SubjectEtcdBackupUnschedules,
		events.SubjectDrillSchedules, events.SubjectDrillUnschedules,
		events.SubjectCopySchedules, events.SubjectCopyUnschedules,
	},
	Bind: runner.NoFlags(func(_ context.Context, d runner.Deps) (runner.Handler, error) {
		return &Scheduler{Client: d.Client, JetStream: d.JetStream, Cluster: d.Cluster, Log: d.Log, Now: time.Now}, nil
	}),
}

// Scheduler keeps the schedule of each EtcdBackupConfig, RestoreDrill and BackupCopyPolicy on
// the NATS server in line with the object.
type Scheduler struct {
	Client    client.Client
	JetStream jetstream.JetStream
	Cluster   string
	Log       *zap.Logger
	Now       func() time.Time
}

// Handle converges the live object's schedule: installed (replaced) while the object lives,
// purged when it is deleted, then the finalizer released.
func (s *Scheduler) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return err
	}
	switch ref.Kind {
	case events.KindEtcdBackupConfig:
		return configSchedules.converge(ctx, s, ref.Name)
	case events.KindRestoreDrill:
		return drillSchedules.converge(ctx, s, ref.Name)
	case events.KindBackupCopyPolicy:
		return copySchedules.converge(ctx, s, ref.Name)
	default:
		return runner.Permanentf("the schedule function keeps the schedules of EtcdBackupConfigs, RestoreDrills and BackupCopyPolicies, not of a %s", ref.Kind)
	}
}

// scheduleKind is what the Scheduler needs of a kind whose objects carry a schedule, so that
// every such kind shares one way to install, remove and report one.
type scheduleKind[T client.Object] struct {
	kind      events.Kind
	newObject func() T
	// key is the object an event names, or why the name cannot be one of the kind's.
	key func(name string) (client.ObjectKey, error)
	// holder is the object's schedule subject; unholder is where its removal is asked for.
	holder, unholder func(client.ObjectKey) string
	// spec is the object's schedule and the time zone its cron is read in.
	spec func(T) (schedule, timeZone string)
	// oneOff is the Scheduled message of an object without a schedule, run once now; "" for
	// a kind whose schedule is required.
	oneOff string
	// due is the event the object's schedule fires.
	due func(cluster string, obj T, now time.Time) (cloudevents.Event, error)
	// status is where the Scheduled condition and the observed generation go.
	status func(T) (conditions *[]metav1.Condition, observedGeneration *int64)
}

// configSchedules are EtcdBackupConfigs': namespaced, a config without a schedule is backed up
// once, now.
var configSchedules = scheduleKind[*backupv1alpha1.EtcdBackupConfig]{
	kind:      events.KindEtcdBackupConfig,
	newObject: newConfig,
	key: func(name string) (client.ObjectKey, error) {
		namespace, n := events.SplitObjectName(name)
		if namespace == "" {
			return client.ObjectKey{}, runner.Permanentf("event names %q, not <namespace>/<name>", name)
		}
		return client.ObjectKey{Namespace: namespace, Name: n}, nil
	},
	holder:   func(k client.ObjectKey) string { return events.EtcdBackupScheduleSubject(k.Namespace, k.Name) },
	unholder: func(k client.ObjectKey) string { return events.EtcdBackupUnscheduleSubject(k.Namespace, k.Name) },
	spec:     func(c *backupv1alpha1.EtcdBackupConfig) (string, string) { return c.Spec.Schedule, c.Spec.TimeZone },
	oneOff:   "One backup, now",
	due: func(cluster string, c *backupv1alpha1.EtcdBackupConfig, now time.Time) (cloudevents.Event, error) {
		return events.NewEtcdBackupDueEvent(cluster, kube.Ref(events.KindEtcdBackupConfig, c), c.Spec.Schedule, now)
	},
	status: func(c *backupv1alpha1.EtcdBackupConfig) (*[]metav1.Condition, *int64) {
		return &c.Status.Conditions, &c.Status.ObservedGeneration
	},
}

// drillSchedules are RestoreDrills': cluster-scoped, their schedule required.
var drillSchedules = scheduleKind[*backupv1alpha1.RestoreDrill]{
	kind:      events.KindRestoreDrill,
	newObject: func() *backupv1alpha1.RestoreDrill { return &backupv1alpha1.RestoreDrill{} },
	key:       clusterScopedKey(events.KindRestoreDrill),
	holder:    func(k client.ObjectKey) string { return events.DrillScheduleSubject(k.Name) },
	unholder:  func(k client.ObjectKey) string { return events.DrillUnscheduleSubject(k.Name) },
	spec:      func(d *backupv1alpha1.RestoreDrill) (string, string) { return d.Spec.Schedule, d.Spec.TimeZone },
	due: func(cluster string, d *backupv1alpha1.RestoreDrill, now time.Time) (cloudevents.Event, error) {
		return events.NewDrillDueEvent(cluster, kube.Ref(events.KindRestoreDrill, d), d.Spec.Schedule, now)
	},
	status: func(d *backupv1alpha1.RestoreDrill) (*[]metav1.Condition, *int64) {
		return &d.Status.Conditions, &d.Status.ObservedGeneration
	},
}

// copySchedules are BackupCopyPolicies': cluster-scoped, their schedule required.
var copySchedules = scheduleKind[*backupv1alpha1.BackupCopyPolicy]{
	kind:      events.KindBackupCopyPolicy,
	newObject: func() *backupv1alpha1.BackupCopyPolicy { return &backupv1alpha1.BackupCopyPolicy{} },
	key:       clusterScopedKey(events.KindBackupCopyPolicy),
	holder:    func(k client.ObjectKey) string { return events.CopyScheduleSubject(k.Name) },
	unholder:  func(k client.ObjectKey) string { return events.CopyUnscheduleSubject(k.Name) },
	spec:      func(p *backupv1alpha1.BackupCopyPolicy) (string, string) { return p.Spec.Schedule, p.Spec.TimeZone },
	due: func(cluster string, p *backupv1alpha1.BackupCopyPolicy, now time.Time) (cloudevents.Event, error) {
		return events.NewCopyDueEvent(cluster, kube.Ref(events.KindBackupCopyPolicy, p), p.Spec.Schedule, now)
	},
	status: func(p *backupv1alpha1.BackupCopyPolicy) (*[]metav1.Condition, *int64) {
		return &p.Status.Conditions, &p.Status.ObservedGeneration
	},
}

// clusterScopedKey is the key of a cluster-scoped kind's object an event names by its name.
func clusterScopedKey(kind events.Kind) func(name string) (client.ObjectKey, error) {
	return func(name string) (client.ObjectKey, error) {
		if namespace, _ := events.SplitObjectName(name); namespace != "" {
			return client.ObjectKey{}, runner.Permanentf("event names %q, but a %s is cluster-scoped: named by its name alone", name, kind)
		}
		return client.ObjectKey{Name: name}, nil
	}
}

func newConfig() *backupv1alpha1.EtcdBackupConfig { return &backupv1alpha1.EtcdBackupConfig{} }

// converge installs the schedule of the object an event names, or removes it.
func (k scheduleKind[T]) converge(ctx context.Context, s *Scheduler, name string) error {
	key, err := k.key(name)
	if err != nil {
		return err
	}
	obj := k.newObject()
	if err := s.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return k.unschedule(ctx, s, key) // gone without us: make sure no schedule is left
		}
		return err
	}
	if obj.GetDeletionTimestamp() != nil {
		return k.release(ctx, s, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, backupv1alpha1.Finalizer) {
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(obj, backupv1alpha1.Finalizer)
		if err := s.Client.Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("adding finalizer: %w", err)
		}
	}
	schedule, timeZone := k.spec(obj)
	if schedule == "" && k.oneOff != "" && k.scheduledAt(obj) {
		return nil // a one-off run of this generation was scheduled already
	}
	refused, err := k.install(ctx, s, obj)
	if err != nil {
		return err
	}
	generation := obj.GetGeneration()
	return kube.UpdateStatus(ctx, s.Client, key, k.newObject, func(live T) {
		if live.GetGeneration() != generation {
			return // changed meanwhile: its own event installs it
		}
		conditions, observed := k.status(live)
		*observed = generation
		switch {
		case refused != nil:
			kube.SetCondition(conditions, generation, backupv1alpha1.ConditionScheduled, false, backupv1alpha1.ReasonInvalidSchedule, refused.Error())
		case schedule == "":
			kube.SetCondition(conditions, generation, backupv1alpha1.ConditionScheduled, true, backupv1alpha1.ReasonScheduleInstalled, k.oneOff)
		default:
			kube.SetCondition(conditions, generation, backupv1alpha1.ConditionScheduled, true, backupv1alpha1.ReasonScheduleInstalled,
				fmt.Sprintf("Schedule %q%s installed on the NATS server", schedule, inZone(timeZone)))
		}
	})
}

// scheduledAt reports whether obj's schedule was installed for its current generation.
func (k scheduleKind[T]) scheduledAt(obj T) bool {
	conditions, _ := k.status(obj)
	c := meta.FindStatusCondition(*conditions, backupv1alpha1.ConditionScheduled)
	return c != nil && c.ObservedGeneration == obj.GetGeneration() && c.Status == metav1.ConditionTrue
}

func inZone(tz string) string {
	if tz == "" {
		return ""
	}
	return " in " + tz
}

// install publishes obj's schedule on its schedule subject, replacing the one there. The
// server validates the schedule: one it refuses is returned as the first result, to be
// reported, not retried.
func (k scheduleKind[T]) install(ctx context.Context, s *Scheduler, obj T) (refused error, err error) {
	schedule, timeZone := k.spec(obj)
	name := events.ObjectName(obj.GetNamespace(), obj.GetName())
	if schedule == "" && k.oneOff == "" {
		// The API server requires one: only an object it did not validate gets here.
		return fmt.Errorf("a %s needs a schedule", k.kind), nil
	}
	due, err := k.due(s.Cluster, obj, s.Now())
	if err != nil {
		return nil, err
	}
	msg, err := events.Encode(due)
	if err != nil {
		return nil, err
	}
	opts := append(events.Schedule(msg, k.holder(client.ObjectKeyFromObject(obj))), jetstream.WithScheduleTTL(DueMessageTTL))
	switch {
	case schedule == "":
		// Once, now: the scheduler's whole seconds make it within a second or two.
		opts = append(opts, jetstream.WithScheduleAt(s.Now().Add(time.Second)))
	default:
		opts = append(opts, jetstream.WithScheduleCron(schedule))
		if timeZone != "" {
			opts = append(opts, jetstream.WithScheduleTimeZone(timeZone))
		}
	}
	_, err = s.JetStream.PublishMsg(ctx, msg, opts...)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		s.Log.Info("schedule installed", zap.String("kind", string(k.kind)), zap.String("name", name), zap.String("schedule", schedule),
			zap.String("timeZone", timeZone), zap.Int64("generation", obj.GetGeneration()))
		return nil, nil
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusBadRequest:
		return fmt.Errorf("the NATS server refuses schedule %q%s: %s", schedule, inZone(timeZone), apiErr.Description), nil
	default:
		return nil, fmt.Errorf("installing the schedule of %s %s: %w", k.kind, name, err)
	}
}

// unschedule removes the schedule of the object at key: no further fires. It asks the server
// to purge the schedule subject with a message on the object's unschedule subject (headers
// Nats-Scheduler and Nats-Schedule-Next: purge), which needs only a publish right, not the
// right to purge the stream of record. Idempotent: a subject without a schedule is left as it
// is.
func (k scheduleKind[T]) unschedule(ctx context.Context, s *Scheduler, key client.ObjectKey) error {
	msg := nats.NewMsg(k.unholder(key))
	msg.Header.Set(jetstream.SchedulerHeader, k.holder(key))
	msg.Header.Set(jetstream.ScheduleNextHeader, "purge")
	if _, err := s.JetStream.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("removing the schedule of %s %s: %w", k.kind, events.ObjectName(key.Namespace, key.Name), err)
	}
	return nil
}

// release removes the schedule, then the finalizer.
func (k scheduleKind[T]) release(ctx context.Context, s *Scheduler, obj T) error {
	if !controllerutil.ContainsFinalizer(obj, backupv1alpha1.Finalizer) {
		return nil
	}
	key := client.ObjectKeyFromObject(obj)
	if err := k.unschedule(ctx, s, key); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, backupv1alpha1.Finalizer)
	if err := s.Client.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	s.Log.Info("schedule removed", zap.String("kind", string(k.kind)), zap.String("name", events.ObjectName(key.Namespace, key.Name)))
	return nil
}
