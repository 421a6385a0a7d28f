package etcdbackup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// Forged events for the schedule and snapshot functions. Anyone who can publish on
// housekeeper's subjects can forge them, on the event's own subject or on a function's
// redrive subject; the functions must decide from the live config and the store.
//
//   - A forged etcdbackupconfig.deleting event about a live config (the copy says it is being
//     deleted and holds the finalizer; with a made-up uid, with resourceVersion "1", or with
//     the live uid and resourceVersion) leaves the config as it was — finalizer on, no
//     deletionTimestamp, same resourceVersion — and its schedule on the server.
//   - A forged etcdbackup.due event whose Housekeeper-Fired-At lies a year ahead deletes none
//     of the config's backups. The config keeps 3; its 3 backups are dated a day ahead of the
//     test, so that a due event handled as an ordinary fire now — which a fixed function may
//     well do: a fire now is what the scheduler itself sends — makes a backup that is the
//     oldest and is rotated out itself. Only a fire dated after the backups, the forged time
//     taken at its word, rotates one of them out. No backup dated after them may appear.
//
// After the forged events, both consumers must come to rest (nothing pending or
// unacknowledged, no retry scheduled, the delivered sequence not growing over 3 s), and the
// schedule function must have dead-lettered nothing: a well-formed event about a live config
// is converged, not given up on. The snapshot function may dead-letter the forged future fires
// themselves (refusing them is a fair answer) but nothing else.
func TestForgedEtcdBackupEvents(t *testing.T) {
	began := time.Now()
	p := pipeline.Start(t)
	c := p.Client
	ctx := context.Background()
	createNamespaces(t, c, "garden", "team")
	reg, _ := providers(t)
	dest := newDestination(t, p.Env, c, reg, local.Type, "forged")
	etcd := testenv.StartEtcd(t, 5)
	p.RunFunction(etcdbackup.ScheduleDefinition, reg)
	p.RunFunction(etcdbackup.SnapshotDefinition, reg)

	type deletingCase struct {
		identity string // made-up-uid, rv-1, current-rv
		redrive  bool
	}
	var deleting []deletingCase
	for _, identity := range []string{"made-up-uid", "rv-1", "current-rv"} {
		for _, redrive := range []bool{false, true} {
			deleting = append(deleting, deletingCase{identity, redrive})
		}
	}
	dueRedrive := []bool{false, true}

	// A yearly schedule: no real fire during the test.
	newCfg := func(name string) *backupv1alpha1.EtcdBackupConfig {
		cfg := newConfig("team", name, dest.obj.Name, 3, etcd.ClientURL)
		cfg.Spec.Schedule = "@yearly"
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	delCfgs := make([]*backupv1alpha1.EtcdBackupConfig, len(deleting))
	for i := range deleting {
		delCfgs[i] = newCfg(fmt.Sprintf("deleting-%d", i))
	}
	dueCfgs := make([]*backupv1alpha1.EtcdBackupConfig, len(dueRedrive))
	originals := make([][]string, len(dueRedrive))
	// A day ahead, to the second: later than any fire now during the test.
	ahead := time.Now().UTC().Truncate(time.Second).Add(24 * time.Hour)
	for i := range dueRedrive {
		dueCfgs[i] = newCfg(fmt.Sprintf("future-fire-%d", i))
		for h := range 3 {
			key := destination.ConfigKey(dueCfgs[i], ahead.Add(time.Duration(h)*time.Hour))
			if err := objectstore.PutBytes(ctx, dest.store, key, []byte("a backup")); err != nil {
				t.Fatal(err)
			}
			originals[i] = append(originals[i], key)
		}
	}
	for _, cfg := range slices.Concat(delCfgs, dueCfgs) {
		p.Eventually(30*time.Second, events.ObjectName(cfg.Namespace, cfg.Name)+" scheduled, with its finalizer", func() (bool, string) {
			live := &backupv1alpha1.EtcdBackupConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
				return false, err.Error()
			}
			return scheduled(live) && controllerutil.ContainsFinalizer(live, backupv1alpha1.Finalizer) &&
				observeSchedule(p.JS, configHolder(cfg)) != "no schedule", fmt.Sprintf("finalizers %v, status %+v", live.Finalizers, live.Status)
		})
	}
	for _, fn := range []string{etcdbackup.ScheduleDefinition.Name, etcdbackup.SnapshotDefinition.Name} {
		if _, err := p.AtRest(fn); err != nil {
			t.Fatal(err)
		}
	}

	observeConfig := func(cfg *backupv1alpha1.EtcdBackupConfig) string {
		return observeObject(ctx, c, client.ObjectKeyFromObject(cfg), &backupv1alpha1.EtcdBackupConfig{})
	}
	before := make([][2]string, len(deleting))
	for i, cfg := range delCfgs {
		before[i] = [2]string{observeConfig(cfg), observeSchedule(p.JS, configHolder(cfg))}
	}

	delForged := make([]pipeline.Stored, len(deleting))
	for i, dc := range deleting {
		live := &backupv1alpha1.EtcdBackupConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(delCfgs[i]), live); err != nil {
			t.Fatal(err)
		}
		switch dc.identity {
		case "made-up-uid":
			live.UID = uuid.NewUUID()
		case "rv-1":
			live.ResourceVersion = "1"
		}
		now := metav1.Now()
		live.DeletionTimestamp = &now
		controllerutil.AddFinalizer(live, backupv1alpha1.Finalizer)
		e, err := pipeline.ObjectEvent(events.KindEtcdBackupConfig, events.OpDeleting, live,
			events.WithTrigger("forged-"+string(uuid.NewUUID())))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		delForged[i] = publishForged(p, msg, dc.redrive, etcdbackup.ScheduleDefinition.Name)
	}
	future := time.Now().UTC().AddDate(1, 0, 0)
	dueForged := make([]pipeline.Stored, len(dueRedrive))
	for i, redrive := range dueRedrive {
		live := &backupv1alpha1.EtcdBackupConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(dueCfgs[i]), live); err != nil {
			t.Fatal(err)
		}
		e, err := events.NewEtcdBackupDueEvent(pipeline.Cluster, kube.Ref(events.KindEtcdBackupConfig, live), live.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		// The due event's id is the one its installed schedule carries: a fresh one, or
		// JetStream drops the forgery as a duplicate.
		e.SetID(strings.ReplaceAll(string(uuid.NewUUID()), "-", ""))
		msg, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		msg.Header.Set(events.HeaderFiredAt, future.Format(time.RFC3339Nano))
		dueForged[i] = publishForged(p, msg, redrive, etcdbackup.SnapshotDefinition.Name)
	}

	infos := map[string]*jetstream.ConsumerInfo{}
	for _, fn := range []string{etcdbackup.ScheduleDefinition.Name, etcdbackup.SnapshotDefinition.Name} {
		info, err := p.AtRest(fn)
		if err != nil {
			t.Errorf("after the forged events: %v", err)
		}
		infos[fn] = info
	}
	dls := p.DeadLetters("")
	for _, d := range dls {
		ours := slices.ContainsFunc(dueForged, func(m pipeline.Stored) bool { return m.ID == d.EventID })
		if !ours || d.Function != etcdbackup.SnapshotDefinition.Name {
			t.Errorf("unexpected dead letter of %s: %s %s (%s): %s", d.Function, d.EventType, d.EventID, d.Subject, d.Reason)
		}
	}

	for i, dc := range deleting {
		via := map[bool]string{false: "object-subject", true: "redrive"}[dc.redrive]
		t.Run("etcdbackupconfig.deleting:"+dc.identity+":"+via, func(t *testing.T) {
			if err := pipeline.Acked(infos[etcdbackup.ScheduleDefinition.Name], delForged[i]); err != nil {
				t.Fatal(err)
			}
			after := [2]string{observeConfig(delCfgs[i]), observeSchedule(p.JS, configHolder(delCfgs[i]))}
			if after != before[i] {
				t.Errorf("the forged deleting event (stream sequence %d on %s) changed the config or its schedule:\n  config before: %s\n  config after:  %s\n  schedule before: %s\n  schedule after:  %s",
					delForged[i].Seq, delForged[i].Subject, before[i][0], after[0], before[i][1], after[1])
			}
		})
	}
	for i, redrive := range dueRedrive {
		via := map[bool]string{false: "object-subject", true: "redrive"}[redrive]
		t.Run("etcdbackup.due:fired-at-next-year:"+via, func(t *testing.T) {
			if err := pipeline.Acked(infos[etcdbackup.SnapshotDefinition.Name], dueForged[i]); err != nil {
				t.Fatal(err)
			}
			keys := listAll(t, dest.store, destination.ConfigPrefix(dueCfgs[i]))
			for _, k := range originals[i] {
				if !slices.Contains(keys, k) {
					t.Errorf("backup %s was deleted by the forged due event (stream sequence %d on %s); backups now: %q", k, dueForged[i].Seq, dueForged[i].Subject, keys)
				}
			}
			newest := originals[i][len(originals[i])-1]
			for _, k := range keys {
				if k > newest {
					t.Errorf("backup %s is dated after every real backup (the forged fire time taken at its word)", k)
				}
			}
			if s := observeSchedule(p.JS, configHolder(dueCfgs[i])); s == "no schedule" || strings.HasPrefix(s, "unreadable") {
				t.Errorf("the config's schedule: %s", s)
			}
		})
	}
	t.Logf("test took %s", time.Since(began).Round(time.Second))
}

// Forged restoredrill.deleting events about a live drill — with a made-up uid, with
// resourceVersion "1", or with the live uid and resourceVersion; on the event's own subject or
// on the schedule function's redrive subject — leave the drill as it was (finalizer on, no
// deletionTimestamp, same resourceVersion) and its schedule on the server. The schedule
// function comes to rest and dead-letters none of them: a well-formed event about a live drill
// is converged, not given up on.
func TestForgedRestoreDrillEvents(t *testing.T) {
	p := pipeline.Start(t)
	c := p.Client
	ctx := context.Background()
	p.RunFunction(etcdbackup.ScheduleDefinition, nil)
	schedule := etcdbackup.ScheduleDefinition.Name

	type forgery struct {
		identity string // made-up-uid, rv-1, current-rv
		redrive  bool
	}
	var forgeries []forgery
	for _, identity := range []string{"made-up-uid", "rv-1", "current-rv"} {
		for _, redrive := range []bool{false, true} {
			forgeries = append(forgeries, forgery{identity, redrive})
		}
	}
	drills := make([]*backupv1alpha1.RestoreDrill, len(forgeries))
	for i := range forgeries {
		// A yearly schedule: no fire during the test.
		drills[i] = &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("forged-%d", i)},
			Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "@yearly"}}
		if err := c.Create(ctx, drills[i]); err != nil {
			t.Fatal(err)
		}
	}
	observeDrill := func(d *backupv1alpha1.RestoreDrill) string {
		return observeObject(ctx, c, client.ObjectKeyFromObject(d), &backupv1alpha1.RestoreDrill{})
	}
	for _, d := range drills {
		p.Eventually(30*time.Second, d.Name+" scheduled, with its finalizer", func() (bool, string) {
			state := observeDrill(d)
			return strings.Contains(state, backupv1alpha1.Finalizer) && observeSchedule(p.JS, events.DrillScheduleSubject(d.Name)) != "no schedule", state
		})
	}
	if _, err := p.AtRest(schedule); err != nil {
		t.Fatal(err)
	}
	before := make([][2]string, len(drills))
	for i, d := range drills {
		before[i] = [2]string{observeDrill(d), observeSchedule(p.JS, events.DrillScheduleSubject(d.Name))}
	}

	forged := make([]pipeline.Stored, len(forgeries))
	for i, f := range forgeries {
		live := &backupv1alpha1.RestoreDrill{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(drills[i]), live); err != nil {
			t.Fatal(err)
		}
		switch f.identity {
		case "made-up-uid":
			live.UID = uuid.NewUUID()
		case "rv-1":
			live.ResourceVersion = "1"
		}
		now := metav1.Now()
		live.DeletionTimestamp = &now
		e, err := pipeline.ObjectEvent(events.KindRestoreDrill, events.OpDeleting, live, events.WithTrigger("forged-"+string(uuid.NewUUID())))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		forged[i] = publishForged(p, msg, f.redrive, schedule)
	}
	info, err := p.AtRest(schedule)
	if err != nil {
		t.Errorf("after the forged events: %v", err)
	}
	for _, d := range p.DeadLetters(schedule) {
		t.Errorf("unexpected dead letter: %s %s (%s): %s", d.EventType, d.EventID, d.Subject, d.Reason)
	}
	for i, f := range forgeries {
		via := map[bool]string{false: "object-subject", true: "redrive"}[f.redrive]
		t.Run("restoredrill.deleting:"+f.identity+":"+via, func(t *testing.T) {
			if err := pipeline.Acked(info, forged[i]); err != nil {
				t.Fatal(err)
			}
			after := [2]string{observeDrill(drills[i]), observeSchedule(p.JS, events.DrillScheduleSubject(drills[i].Name))}
			if after != before[i] {
				t.Errorf("the forged deleting event (stream sequence %d on %s) changed the drill or its schedule:\n  drill before: %s\n  drill after:  %s\n  schedule before: %s\n  schedule after:  %s",
					forged[i].Seq, forged[i].Subject, before[i][0], after[0], before[i][1], after[1])
			}
		})
	}
}

// configHolder is the config's schedule subject.
func configHolder(cfg *backupv1alpha1.EtcdBackupConfig) string {
	return events.EtcdBackupScheduleSubject(cfg.Namespace, cfg.Name)
}

// observeSchedule renders the schedule on holder, a schedule subject: whether it is there, and
// what it says.
func observeSchedule(js jetstream.JetStream, holder string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	msg, err := stream.GetLastMsgForSubject(ctx, holder)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return "no schedule"
	case err != nil:
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("schedule %q targeting %s", msg.Header.Get("Nats-Schedule"), msg.Header.Get("Nats-Schedule-Target"))
}

// publishForged publishes msg on its subject, or on function's redrive subject if redrive.
func publishForged(p *pipeline.Pipeline, msg *nats.Msg, redrive bool, function string) pipeline.Stored {
	p.T.Helper()
	if redrive {
		msg.Subject = events.RedriveSubject(function)
	}
	return p.PublishNew(msg)
}

// observeObject is what a forged event could have changed on the live object at key, read
// into live: its identity, deletion and finalizers, or that it is gone.
func observeObject(ctx context.Context, c client.Reader, key client.ObjectKey, live client.Object) string {
	if err := c.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return "absent (not found)"
		}
		return "unreadable: " + err.Error()
	}
	deletion := "none"
	if ts := live.GetDeletionTimestamp(); ts != nil {
		deletion = ts.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("uid=%s resourceVersion=%s deletionTimestamp=%s finalizers=%v", live.GetUID(), live.GetResourceVersion(), deletion, live.GetFinalizers())
}
