package etcdbackup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The whole path with a real cron schedule on the NATS server: the bridge announces the
// config, the schedule function installs "* * * * * *", every fire wakes the snapshot
// function, two fires make two backups; deleting the config removes the schedule from the
// server before the config goes. NATS is secured as an operator runs it (TLS, and each
// component a JWT identity with the permissions `housekeeper nats-auth` issues): the schedule
// function installs and removes schedules with its publish rights alone.
func TestEverySecondCron(t *testing.T) {
	p := pipeline.StartSecure(t, natsconn.FormJWT)
	c := p.Client
	createNamespaces(t, c, "garden", "team")
	reg, _ := providers(t)
	dest := newDestination(t, p.Env, c, reg, local.Type, "cron")
	etcd := testenv.StartEtcd(t, 10)
	p.RunFunction(etcdbackup.ScheduleDefinition, reg)
	p.RunFunction(etcdbackup.SnapshotDefinition, reg)
	ctx := context.Background()

	cfg := newConfig("team", "every-second", dest.obj.Name, 10, etcd.ClientURL)
	cfg.Spec.Schedule = "* * * * * *"
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	live := &backupv1alpha1.EtcdBackupConfig{}
	p.Eventually(30*time.Second, "two fires, two backups", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
			return false, err.Error()
		}
		return live.Status.BackupCount >= 2, fmt.Sprintf("status %+v", live.Status)
	})
	if keys := listAll(t, dest.store, "team/every-second/"); len(keys) < 2 || keys[0] == keys[1] {
		t.Fatalf("backups in the store: %q", keys)
	}
	if !scheduled(live) || live.Status.NextRun == nil {
		t.Fatalf("status after two fires: %+v", live.Status)
	}
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	subject := events.EtcdBackupScheduleSubject(cfg.Namespace, cfg.Name)
	if msg, err := stream.GetLastMsgForSubject(ctx, subject); err != nil || msg.Header.Get("Nats-Schedule") != "* * * * * *" {
		t.Fatalf("schedule on the server: %v (%v)", msg, err)
	}

	if err := c.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	p.Eventually(30*time.Second, "the config gone, its finalizer released", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cfg), live)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v, finalizers %v", err, live.Finalizers)
	})
	if _, err := stream.GetLastMsgForSubject(ctx, subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the schedule outlived its config: %v", err)
	}
	if refused := p.RefusedByNATS(); refused != "" {
		t.Errorf("nats-server refused operations of housekeeper's own components:\n%s", refused)
	}
}

// Schedules the CRD's pattern lets through but the NATS server refuses become a condition.
func TestRefusedSchedule(t *testing.T) {
	p := pipeline.Start(t)
	c := p.Client
	createNamespaces(t, c, "garden", "team")
	p.RunFunction(etcdbackup.ScheduleDefinition, nil)
	ctx := context.Background()
	for name, mutate := range map[string]func(*backupv1alpha1.EtcdBackupConfigSpec){
		"bad-minute":    func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Schedule = "0 61 * * * *" },
		"bad-time-zone": func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.TimeZone = "Mars/Olympus_Mons" },
	} {
		cfg := newConfig("team", name, "anywhere", 3, "http://127.0.0.1:1")
		mutate(&cfg.Spec)
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p.Eventually(30*time.Second, name+" reported", func() (bool, string) {
			live, cond := condition(t, c, cfg, backupv1alpha1.ConditionScheduled)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == backupv1alpha1.ReasonInvalidSchedule &&
				cond.ObservedGeneration == live.Generation, fmt.Sprintf("%+v", cond)
		})
	}
	p.Drained(etcdbackup.ScheduleDefinition.Name)
	if dls := p.DeadLetters(etcdbackup.ScheduleDefinition.Name); len(dls) != 0 {
		t.Fatalf("dead letters: %+v", dls)
	}
}

func scheduled(cfg *backupv1alpha1.EtcdBackupConfig) bool {
	for _, c := range cfg.Status.Conditions {
		if c.Type == backupv1alpha1.ConditionScheduled {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == cfg.Generation
		}
	}
	return false
}

// A config without a schedule is backed up once, now: the server fires its "@at" schedule
// once and drops it; the config keeps its one backup.
func TestOnceNow(t *testing.T) {
	p := pipeline.Start(t)
	c := p.Client
	createNamespaces(t, c, "garden", "team")
	reg, _ := providers(t)
	dest := newDestination(t, p.Env, c, reg, local.Type, "once")
	etcd := testenv.StartEtcd(t, 5)
	p.RunFunction(etcdbackup.ScheduleDefinition, reg)
	p.RunFunction(etcdbackup.SnapshotDefinition, reg)
	ctx := context.Background()

	cfg := newConfig("team", "once", dest.obj.Name, 3, etcd.ClientURL)
	cfg.Spec.Schedule = ""
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	subject := events.EtcdBackupScheduleSubject(cfg.Namespace, cfg.Name)
	live := &backupv1alpha1.EtcdBackupConfig{}
	p.Eventually(30*time.Second, "one backup, the one-off schedule gone from the server", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
			return false, err.Error()
		}
		_, err := stream.GetLastMsgForSubject(ctx, subject)
		return live.Status.BackupCount == 1 && errors.Is(err, jetstream.ErrMsgNotFound),
			fmt.Sprintf("status %+v; schedule: %v", live.Status, err)
	})
	p.Drained(etcdbackup.SnapshotDefinition.Name)
	if keys := listAll(t, dest.store, "team/once/"); len(keys) != 1 || live.Status.NextRun != nil {
		t.Fatalf("backups %q, nextRun %v", keys, live.Status.NextRun)
	}
}

// A RestoreDrill's and a BackupCopyPolicy's schedule on a real NATS server, secured as an
// operator runs it: the bridge announces the object, the schedule function installs its cron in
// its time zone, and the server fires its due events (drill.due, copy.due) on its due subject,
// for the drill or the copy function to run; deleting the object removes the schedule from the
// server before the object goes.
func TestClusterScopedSchedules(t *testing.T) {
	p := pipeline.StartSecure(t, natsconn.FormJWT)
	p.RunFunction(etcdbackup.ScheduleDefinition, nil)
	t.Run("RestoreDrill", func(t *testing.T) {
		drill := &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: "every-second"},
			Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "* * * * * *", TimeZone: "Europe/Berlin"}}
		testClusterScopedSchedule(t, p, drill, &drill.Status.Conditions, events.KindRestoreDrill, events.TypeDrillDue,
			events.DrillScheduleSubject(drill.Name))
	})
	t.Run("BackupCopyPolicy", func(t *testing.T) {
		policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "every-second"},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Types: []string{"local"}}, Destination: "second",
				Schedule: "* * * * * *", TimeZone: "Europe/Berlin"}}
		testClusterScopedSchedule(t, p, policy, &policy.Status.Conditions, events.KindBackupCopyPolicy, events.TypeCopyDue,
			events.CopyScheduleSubject(policy.Name))
	})
	if refused := p.RefusedByNATS(); refused != "" {
		t.Errorf("nats-server refused operations of housekeeper's own components:\n%s", refused)
	}
}

// testClusterScopedSchedule creates obj (a cron of every second in Europe/Berlin), whose status
// conditions are at conditions once read, and follows its schedule on holder, its fires of
// dueType, and its deletion.
func testClusterScopedSchedule(t *testing.T, p *pipeline.Pipeline, obj client.Object, conditions *[]metav1.Condition, kind events.Kind, dueType, holder string) {
	c := p.Client
	ctx := context.Background()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	due, err := events.Subject(dueType, obj.GetName())
	if err != nil {
		t.Fatal(err)
	}
	p.Eventually(30*time.Second, "scheduled, with its finalizer, and fired twice", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(due))
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(*conditions, backupv1alpha1.ConditionScheduled)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == obj.GetGeneration() &&
				controllerutil.ContainsFinalizer(obj, backupv1alpha1.Finalizer) && info.State.Subjects[due] >= 2,
			fmt.Sprintf("finalizers %v, conditions %+v, fires %v", obj.GetFinalizers(), *conditions, info.State.Subjects)
	})
	if msg, err := stream.GetLastMsgForSubject(ctx, holder); err != nil || msg.Header.Get(jetstream.ScheduleHeader) != "* * * * * *" ||
		msg.Header.Get(jetstream.ScheduleTimeZoneHeader) != "Europe/Berlin" {
		t.Fatalf("schedule on the server: %v (%v)", msg, err)
	}
	fired, err := stream.GetLastMsgForSubject(ctx, due)
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Decode(fired.Header, fired.Data)
	if err != nil {
		t.Fatalf("a fire holds no event: %v", err)
	}
	ref, err := events.RefOf(e)
	if err != nil || e.Type() != dueType || ref.Kind != kind || ref.Name != obj.GetName() ||
		ref.UID != string(obj.GetUID()) || fired.Header.Get(jetstream.SchedulerHeader) != holder {
		t.Fatalf("a fire is %s about %+v (%v), scheduled by %q", e.Type(), ref, err, fired.Header.Get(jetstream.SchedulerHeader))
	}

	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	p.Eventually(30*time.Second, "gone, its finalizer released", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v, finalizers %v", err, obj.GetFinalizers())
	})
	if _, err := stream.GetLastMsgForSubject(ctx, holder); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the schedule outlived its object: %v", err)
	}
}
