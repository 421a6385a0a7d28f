package etcdbackup_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The decisions of the schedule function, row by row, over the fake API server and a
// JetStream that records what is published: what goes to the NATS server, in which order
// with the finalizer and the status, the Scheduled condition afterwards, and the class of
// the returned error. Every row runs for an EtcdBackupConfig and for a RestoreDrill, unless it
// is about one kind only. The real-stack tests (schedule_test.go, forged_test.go) show the
// same against a NATS server that schedules and fires.

const (
	fakeNamespace  = "team"
	fakeName       = "main"
	fakeUID        = "uid-main"
	fakeGeneration = 3
	fakeCron       = "0 */5 * * * *"
	// Another controller's finalizer: it keeps a deleted object visible after ours is gone.
	otherFinalizer = "example.com/keep"
)

// fakeNow is the functions' clock in the fast tests.
var fakeNow = time.Date(2026, 11, 23, 10, 20, 0, 0, time.UTC)

type scheduleRow struct {
	name string
	only events.Kind // the kind the row is about; "" for both

	// The object before the run.
	absent   bool   // there is none
	oneOff   bool   // spec.schedule is empty: one backup, now (a drill's schedule is required)
	timeZone string // spec.timeZone
	ours     bool   // our finalizer is on it
	other    bool   // another controller's finalizer is on it
	deleting bool   // deletionTimestamp set
	prior    string // the Scheduled condition: "" none, "installed" (True at this generation), "installed before" (True at an older one), "refused" (False at this one)

	// The event and the world while it is handled.
	eventName string      // the event's name extension, if not the object's
	eventKind events.Kind // the event's kind extension, if not the object's
	pubErr    error       // the NATS server's answer to every publish
	changed   bool        // the object's generation moves while the schedule is published

	want scheduleOutcome
}

type scheduleOutcome struct {
	// The writes in order: "schedule" or "unschedule" (a publish on that subject), "patch" (the
	// finalizer), "status".
	writes    []string
	finalizer bool   // our finalizer afterwards
	gone      bool   // the object is gone (then only writes and err are checked)
	cond      string // the Scheduled condition afterwards, "Status Reason"; "" none
	says      string // in the condition's message, checked when set
	err       runner.Class
}

func TestScheduleDecisions(t *testing.T) {
	refused := &jetstream.APIError{Code: http.StatusBadRequest, ErrorCode: 10189, Description: "invalid message schedule"}
	serverFault := &jetstream.APIError{Code: http.StatusServiceUnavailable, Description: "JetStream system temporarily unavailable"}
	installed := "True " + backupv1alpha1.ReasonScheduleInstalled
	for _, tc := range []scheduleRow{
		// --- Gone: whatever happened, no schedule may outlive the object.
		{name: "gone/unscheduled", absent: true, want: scheduleOutcome{writes: []string{"unschedule"}, gone: true}},
		{name: "gone/NATS does not answer", absent: true, pubErr: nats.ErrTimeout,
			want: scheduleOutcome{writes: []string{"unschedule"}, gone: true, err: runner.ClassUnavailable}},

		// --- Deleting: the schedule goes first, then the finalizer; never the other way.
		{name: "deleting/ours last: unscheduled, released", deleting: true, ours: true, prior: "installed",
			want: scheduleOutcome{writes: []string{"unschedule", "patch"}, gone: true}},
		{name: "deleting/ours and another: unscheduled, ours released", deleting: true, ours: true, other: true, prior: "installed",
			want: scheduleOutcome{writes: []string{"unschedule", "patch"}, cond: installed}},
		{name: "deleting/unschedule fails: finalizer kept", deleting: true, ours: true, other: true, prior: "installed", pubErr: serverFault,
			want: scheduleOutcome{writes: []string{"unschedule"}, finalizer: true, cond: installed, err: runner.ClassRetryable}},
		{name: "deleting/never ours: nothing", deleting: true, other: true, want: scheduleOutcome{}},

		// --- Live, cron: the finalizer first, then the schedule (replacing the one there), then
		// the status.
		{name: "cron/new", want: scheduleOutcome{writes: []string{"patch", "schedule", "status"}, finalizer: true, cond: installed,
			says: `Schedule "0 */5 * * * *" installed on the NATS server`}},
		{name: "cron/new, time zone", timeZone: "Europe/Berlin", want: scheduleOutcome{writes: []string{"patch", "schedule", "status"},
			finalizer: true, cond: installed, says: `Schedule "0 */5 * * * *" in Europe/Berlin installed`}},
		// Installing is idempotent (the server replaces the schedule on its subject): a cron is
		// installed on every event, the status written only when it changes.
		{name: "cron/installed at this generation: installed again, status unchanged", ours: true, prior: "installed",
			want: scheduleOutcome{writes: []string{"schedule"}, finalizer: true, cond: installed}},
		{name: "cron/installed before: installed for this generation", ours: true, prior: "installed before",
			want: scheduleOutcome{writes: []string{"schedule", "status"}, finalizer: true, cond: installed}},
		{name: "cron/refused before, accepted now", ours: true, prior: "refused",
			want: scheduleOutcome{writes: []string{"schedule", "status"}, finalizer: true, cond: installed}},
		// An object changed while its schedule was published is left to the event of the change.
		{name: "cron/changed meanwhile: no status", ours: true, prior: "installed before", changed: true,
			want: scheduleOutcome{writes: []string{"schedule"}, finalizer: true, cond: installed}},

		// --- Live, one-off (configs): installed once per generation. A drill's schedule is
		// required: the API server refuses a drill without one, and one it did not validate is
		// reported, nothing installed.
		{name: "one-off/new", only: events.KindEtcdBackupConfig, oneOff: true, want: scheduleOutcome{writes: []string{"patch", "schedule", "status"}, finalizer: true, cond: installed,
			says: "One backup, now"}},
		{name: "one-off/installed at this generation: nothing", only: events.KindEtcdBackupConfig, oneOff: true, ours: true, prior: "installed",
			want: scheduleOutcome{finalizer: true, cond: installed}},
		{name: "one-off/installed at this generation, finalizer lost: only the finalizer", only: events.KindEtcdBackupConfig, oneOff: true, prior: "installed",
			want: scheduleOutcome{writes: []string{"patch"}, finalizer: true, cond: installed}},
		{name: "one-off/installed before: once more for this generation", only: events.KindEtcdBackupConfig, oneOff: true, ours: true, prior: "installed before",
			want: scheduleOutcome{writes: []string{"schedule", "status"}, finalizer: true, cond: installed}},
		{name: "one-off/refused at this generation: tried again", only: events.KindEtcdBackupConfig, oneOff: true, ours: true, prior: "refused",
			want: scheduleOutcome{writes: []string{"schedule", "status"}, finalizer: true, cond: installed}},

		{name: "no schedule/a condition, nothing installed", only: events.KindRestoreDrill, oneOff: true,
			want: scheduleOutcome{writes: []string{"patch", "status"}, finalizer: true, cond: "False " + backupv1alpha1.ReasonInvalidSchedule,
				says: "a RestoreDrill needs a schedule"}},

		// --- The NATS server's answers.
		{name: "refused/a condition, not a retry", pubErr: refused, want: scheduleOutcome{writes: []string{"patch", "schedule", "status"},
			finalizer: true, cond: "False " + backupv1alpha1.ReasonInvalidSchedule,
			says: `the NATS server refuses schedule "0 */5 * * * *": invalid message schedule`}},
		{name: "refused/in a time zone", timeZone: "Mars/Olympus_Mons", ours: true, prior: "installed", pubErr: refused,
			want: scheduleOutcome{writes: []string{"schedule", "status"}, finalizer: true, cond: "False " + backupv1alpha1.ReasonInvalidSchedule,
				says: "in Mars/Olympus_Mons"}},
		{name: "server fault/retried, no status", pubErr: serverFault,
			want: scheduleOutcome{writes: []string{"patch", "schedule"}, finalizer: true, err: runner.ClassRetryable}},
		{name: "no answer/retried, no status", pubErr: nats.ErrTimeout,
			want: scheduleOutcome{writes: []string{"patch", "schedule"}, finalizer: true, err: runner.ClassUnavailable}},
		{name: "no answer/an older success stays as it was", ours: true, prior: "installed before", pubErr: nats.ErrTimeout,
			want: scheduleOutcome{writes: []string{"schedule"}, finalizer: true, cond: installed, err: runner.ClassUnavailable}},

		// --- Events that name no object of the kind: dead-lettered, nothing touched.
		{name: "event/no namespace", only: events.KindEtcdBackupConfig, eventName: fakeName, want: scheduleOutcome{err: runner.ClassPermanent}},
		{name: "event/no namespace, config gone", only: events.KindEtcdBackupConfig, absent: true, eventName: fakeName,
			want: scheduleOutcome{gone: true, err: runner.ClassPermanent}},
		{name: "event/a namespace for a cluster-scoped drill", only: events.KindRestoreDrill, eventName: fakeNamespace + "/" + fakeName,
			want: scheduleOutcome{err: runner.ClassPermanent}},
		{name: "event/a namespace, drill gone", only: events.KindRestoreDrill, absent: true, eventName: fakeNamespace + "/" + fakeName,
			want: scheduleOutcome{gone: true, err: runner.ClassPermanent}},
		{name: "event/of no known kind", eventKind: "Pod", want: scheduleOutcome{err: runner.ClassPermanent}},
		{name: "event/of a kind without a schedule", eventKind: events.KindBackupEntry, want: scheduleOutcome{err: runner.ClassPermanent}},
	} {
		for _, k := range []rowKind{configRows, drillRows} {
			if tc.only != "" && tc.only != k.kind {
				continue
			}
			t.Run(string(k.kind)+"/"+tc.name, func(t *testing.T) { tc.run(t, k) })
		}
	}
}

// rowKind is what the rows need of the kind they run on.
type rowKind struct {
	kind events.Kind
	// name is how events name the object, key where the API server has it.
	name string
	key  client.ObjectKey
	// holder and unholder are the object's schedule and unschedule subjects; due the type of
	// the event its schedule fires.
	holder, unholder, due string
	// object is an object of the kind with meta and schedule; newObject an empty one.
	object    func(meta metav1.ObjectMeta, schedule, timeZone string) client.Object
	newObject func() client.Object
}

var configRows = rowKind{
	kind: events.KindEtcdBackupConfig, name: events.ObjectName(fakeNamespace, fakeName),
	key:    client.ObjectKey{Namespace: fakeNamespace, Name: fakeName},
	holder: events.EtcdBackupScheduleSubject(fakeNamespace, fakeName), unholder: events.EtcdBackupUnscheduleSubject(fakeNamespace, fakeName),
	due: events.TypeEtcdBackupDue,
	object: func(meta metav1.ObjectMeta, schedule, timeZone string) client.Object {
		meta.Namespace = fakeNamespace
		return &backupv1alpha1.EtcdBackupConfig{ObjectMeta: meta,
			Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{"http://127.0.0.1:1"}},
				Schedule: schedule, TimeZone: timeZone, Keep: 3, Destination: "anywhere"}}
	},
	newObject: func() client.Object { return &backupv1alpha1.EtcdBackupConfig{} },
}

var drillRows = rowKind{
	kind: events.KindRestoreDrill, name: fakeName, key: client.ObjectKey{Name: fakeName},
	holder: events.DrillScheduleSubject(fakeName), unholder: events.DrillUnscheduleSubject(fakeName), due: events.TypeDrillDue,
	object: func(meta metav1.ObjectMeta, schedule, timeZone string) client.Object {
		return &backupv1alpha1.RestoreDrill{ObjectMeta: meta, Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: schedule, TimeZone: timeZone}}
	},
	newObject: func() client.Object { return &backupv1alpha1.RestoreDrill{} },
}

// statusOf is where obj, a config or a drill, has its conditions and observed generation.
func statusOf(obj client.Object) (*[]metav1.Condition, *int64) {
	switch o := obj.(type) {
	case *backupv1alpha1.EtcdBackupConfig:
		return &o.Status.Conditions, &o.Status.ObservedGeneration
	case *backupv1alpha1.RestoreDrill:
		return &o.Status.Conditions, &o.Status.ObservedGeneration
	}
	panic(fmt.Sprintf("no status of a %T", obj))
}

// seed is the object before the run.
func (tc scheduleRow) seed(k rowKind) client.Object {
	meta := metav1.ObjectMeta{Name: fakeName, UID: fakeUID, Generation: fakeGeneration}
	if tc.other {
		meta.Finalizers = append(meta.Finalizers, otherFinalizer)
	}
	if tc.ours {
		meta.Finalizers = append(meta.Finalizers, backupv1alpha1.Finalizer)
	}
	if tc.deleting {
		meta.DeletionTimestamp = &metav1.Time{Time: fakeNow.Add(-time.Minute)}
	}
	schedule := fakeCron
	if tc.oneOff {
		schedule = ""
	}
	obj := k.object(meta, schedule, tc.timeZone)
	// The message the function writes for the outcome, so that an unchanged one writes nothing.
	message := fmt.Sprintf("Schedule %q installed on the NATS server", schedule)
	if tc.oneOff {
		message = "One backup, now"
	}
	cond := metav1.Condition{Type: backupv1alpha1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: backupv1alpha1.ReasonScheduleInstalled,
		Message: message, ObservedGeneration: fakeGeneration, LastTransitionTime: metav1.NewTime(fakeNow.Add(-time.Hour))}
	switch tc.prior {
	case "":
		return obj
	case "installed before":
		cond.ObservedGeneration = fakeGeneration - 1
	case "refused":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, backupv1alpha1.ReasonInvalidSchedule, "the NATS server refuses it"
	}
	conditions, observed := statusOf(obj)
	*observed = cond.ObservedGeneration
	*conditions = []metav1.Condition{cond}
	return obj
}

func (tc scheduleRow) event(t *testing.T, k rowKind) cloudevents.Event {
	t.Helper()
	op := events.OpUpdated
	if tc.deleting {
		op = events.OpDeleting
	}
	name := k.name
	if tc.eventName != "" {
		name = tc.eventName
	}
	e, err := events.NewObjectEvent("test", op, events.Ref{Kind: k.kind, Name: name, UID: fakeUID,
		ResourceVersion: "7", Generation: fakeGeneration}, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if tc.eventKind != "" {
		e.SetExtension(events.ExtKind, string(tc.eventKind))
	}
	return e
}

func (tc scheduleRow) run(t *testing.T, k rowKind) {
	ctx := context.Background()
	j := &journal{}
	var c client.Client
	if tc.absent {
		c = newFakeClient(j)
	} else {
		c = newFakeClient(j, tc.seed(k))
	}
	js := &recordingJetStream{j: j, err: tc.pubErr}
	if tc.changed {
		js.onPublish = func() {
			live := k.newObject()
			if err := c.Get(ctx, k.key, live); err != nil {
				t.Fatal(err)
			}
			live.SetGeneration(fakeGeneration + 1)
			if err := c.Update(ctx, live); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &etcdbackup.Scheduler{Client: c, JetStream: js, Cluster: "test", Log: zaptest.NewLogger(t), Now: func() time.Time { return fakeNow }}

	err := s.Handle(ctx, tc.event(t, k))

	if got := classOf(err); got != tc.want.err {
		t.Errorf("error %v: class %q, want %q", err, got, tc.want.err)
	}
	var writes []string
	for _, w := range j.all() {
		switch {
		case w == "publish "+k.holder:
			w = "schedule"
		case w == "publish "+k.unholder:
			w = "unschedule"
		}
		writes = append(writes, w)
	}
	if !slices.Equal(writes, tc.want.writes) {
		t.Errorf("writes %q, want %q", writes, tc.want.writes)
	}
	for _, m := range js.msgs {
		tc.checkMessage(t, k, m)
	}
	live := k.newObject()
	if err := c.Get(ctx, k.key, live); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	} else if gone := err != nil; gone != tc.want.gone {
		t.Fatalf("%s gone: %v, want %v", k.kind, gone, tc.want.gone)
	} else if gone {
		return
	}
	conditions, observed := statusOf(live)
	cond := meta.FindStatusCondition(*conditions, backupv1alpha1.ConditionScheduled)
	if got := controllerutil.ContainsFinalizer(live, backupv1alpha1.Finalizer); got != tc.want.finalizer {
		t.Errorf("our finalizer: %v, want %v (finalizers %q)", got, tc.want.finalizer, live.GetFinalizers())
	}
	if tc.other && !controllerutil.ContainsFinalizer(live, otherFinalizer) {
		t.Errorf("another controller's finalizer is gone: %q", live.GetFinalizers())
	}
	got := ""
	if cond != nil {
		got = string(cond.Status) + " " + cond.Reason
	}
	if got != tc.want.cond {
		t.Fatalf("Scheduled %q, want %q (%+v)", got, tc.want.cond, cond)
	}
	if cond == nil {
		return
	}
	if !strings.Contains(cond.Message, tc.want.says) {
		t.Errorf("Scheduled says %q, want it to say %q", cond.Message, tc.want.says)
	}
	if slices.Contains(tc.want.writes, "status") && (cond.ObservedGeneration != fakeGeneration || *observed != fakeGeneration) {
		t.Errorf("written for generation %d (status %d), want %d", cond.ObservedGeneration, *observed, fakeGeneration)
	}
}

// checkMessage checks what a publish says to the NATS server: an unschedule asks it to purge
// the schedule's subject; a schedule holds the object's due event and says when to fire it,
// where, and for how long the fired copy lives.
func (tc scheduleRow) checkMessage(t *testing.T, k rowKind, m testenv.Published) {
	t.Helper()
	holder := k.holder
	switch m.Subject {
	case k.unholder:
		if m.Header.Get(jetstream.SchedulerHeader) != holder || m.Header.Get(jetstream.ScheduleNextHeader) != "purge" ||
			m.Header.Get(jetstream.ScheduleHeader) != "" {
			t.Errorf("unschedule headers %v, want %s: %s and %s: purge", m.Header, jetstream.SchedulerHeader, holder, jetstream.ScheduleNextHeader)
		}
	case holder:
		want := map[string]string{
			jetstream.ScheduleHeader:         fakeCron,
			jetstream.ScheduleTimeZoneHeader: tc.timeZone,
			jetstream.ScheduleTTLHeader:      etcdbackup.DueMessageTTL.String(),
			jetstream.MsgTTLHeader:           events.TTLNever,
		}
		if tc.oneOff {
			want[jetstream.ScheduleHeader] = "@at " + fakeNow.Add(time.Second).Format(time.RFC3339)
		}
		target, err := events.Subject(k.due, k.name)
		if err != nil {
			t.Fatal(err)
		}
		want[jetstream.ScheduleTargetHeader] = target
		for k, v := range want {
			if got := m.Header.Get(k); got != v {
				t.Errorf("schedule header %s: %q, want %q", k, got, v)
			}
		}
		e, err := events.Decode(m.Header, m.Data)
		if err != nil {
			t.Fatalf("the schedule holds no event: %v", err)
		}
		ref, err := events.RefOf(e)
		if err != nil || e.Type() != k.due || ref.Kind != k.kind || ref.Name != k.name || ref.UID != fakeUID || ref.Generation != fakeGeneration {
			t.Errorf("the schedule fires %s about %+v (%v), want %s of %s %s, uid %s at generation %d", e.Type(), ref, err,
				k.due, k.kind, k.name, fakeUID, fakeGeneration)
		}
	default:
		t.Errorf("published on %s", m.Subject)
	}
}

// classOf is the class of a handler's error, "" for none.
func classOf(err error) runner.Class {
	if err == nil {
		return ""
	}
	return runner.ClassOf(err)
}
