package etcdbackup_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// The decisions of the snapshot function that need no etcd, row by row, over the fake API
// server and a store in memory: which fires are taken at their word, what bad input becomes
// (a False BackupSucceeded condition with its reason, settled) and what is retried, and, for a
// fire whose backup is in the store already (a fire delivered again), the rotation and the
// status. Taking the snapshot itself (streaming, checking etcd's trailer, an etcd that does
// not answer) needs a real etcd: snapshot_test.go and tls_test.go.

const (
	fakeDestination = "backups"
	fakeBucket      = "etcd-backups"
	fakeEndpoint    = "https://store.example"
	fakePrefix      = fakeNamespace + "/" + fakeName + "/"
)

var (
	fireAt   = fakeNow                      // the fire the rows handle
	fireNext = fakeNow.Add(5 * time.Minute) // when the schedule fires next, as the server says
	fireKey  = fakePrefix + "20261123T102000Z.db"
	newerKey = fakePrefix + "20261123T103000Z.db"
	// This config's earlier backups, and objects that are not its backups: never deleted.
	olderBackups = []string{fakePrefix + "20261123T100500Z.db", fakePrefix + "20261123T101000Z.db", fakePrefix + "20261123T101500Z.db"}
	bystanders   = []string{fakePrefix + "notes.txt", fakePrefix + "20261123T100000Z.db.partial", fakePrefix + "sub/20261123T090000Z.db",
		fakeNamespace + "/" + fakeName + "-2/20261123T090000Z.db", fakeNamespace + "/20261123T080000Z.db"}
)

type snapshotRow struct {
	name string

	// The config and its world before the run.
	absent     bool
	deleting   bool
	otherUID   bool              // the live config is a new one of the same name
	oneOff     bool              // spec.schedule is empty
	keep       int32             // spec.keep, if not 2
	noKeep     bool              // spec.keep is 0
	dest       string            // spec.destination, if not the BackupDestination there is
	destType   string            // the destination's spec.type, if not the fake store's
	creds      string            // the destination's credentials secret: "" there, "missing", "none" (no secretRef)
	tls        map[string]string // spec.etcd.tlsSecretRef's secret data; nil: no tlsSecretRef; "missing": no secret
	openErr    error
	statErr    error
	listErr    error
	deleteFail bool   // the oldest backup cannot be deleted
	exists     bool   // the backup of this fire is in the store (the fire delivered again)
	newer      bool   // a backup newer than this fire is in the store and the status (a late fire)
	lastThis   bool   // status.lastBackup is this fire's backup, as it was taken
	fire       string // "" the scheduler's fire now; "none" not from the scheduler; "ahead" a year ahead; "skew" 30 s ahead of the function's clock; "once" without a next fire
	event      string // "" the config's; "invalid" of no known kind; "no namespace"
	cancelled  bool

	want snapshotOutcome
}

type snapshotOutcome struct {
	err     runner.Class
	cond    string   // BackupSucceeded afterwards, "Status Reason"; "" none
	says    string   // in its message, checked when set
	keys    []string // the store afterwards; nil: as it was
	opened  bool     // the destination's store was opened
	last    string   // status.lastBackup's key; "" none
	kept    []string // status.backups' keys
	nextRun string   // status.nextRun: "next" (the fire's next), "before" (as it was), "" none
}

func TestSnapshotDecisions(t *testing.T) {
	taken := "True " + backupv1alpha1.ReasonBackupTaken
	rotated := append(slices.Clone(bystanders), olderBackups[2], fireKey)
	keptTwo := []string{fireKey, olderBackups[2]}
	problem := func(reason, says string, opened bool) snapshotOutcome {
		return snapshotOutcome{cond: "False " + reason, says: says, opened: opened, nextRun: "next"}
	}
	for _, tc := range []snapshotRow{
		// --- A fire delivered again finds its backup and is not taken again (no etcd needed):
		// the rotation keeps the newest spec.keep of this config's backups and nothing else.
		{name: "exists/rotated", exists: true, want: snapshotOutcome{cond: taken, says: fmt.Sprintf("Backup %s: %d bytes; 2 kept", fireKey, len("backup of "+fireKey)), opened: true,
			keys: rotated, last: fireKey, kept: keptTwo, nextRun: "next"}},
		{name: "exists/keep all", exists: true, keep: 10, want: snapshotOutcome{cond: taken, says: "4 kept", opened: true,
			last: fireKey, kept: append([]string{fireKey}, reversed(olderBackups)...), nextRun: "next"}},
		{name: "exists/keep one", exists: true, keep: 1, want: snapshotOutcome{cond: taken, opened: true,
			keys: append(slices.Clone(bystanders), fireKey), last: fireKey, kept: []string{fireKey}, nextRun: "next"}},
		{name: "exists/as the status knows it", exists: true, lastThis: true, want: snapshotOutcome{cond: taken, says: "4096 bytes", opened: true,
			keys: rotated, last: fireKey, kept: keptTwo, nextRun: "next"}},
		// A late fire: the newer backup counts in the rotation and stays the last one.
		{name: "exists/late fire", exists: true, newer: true, want: snapshotOutcome{cond: taken, opened: true,
			keys: append(slices.Clone(bystanders), fireKey, newerKey), last: newerKey, kept: []string{newerKey, fireKey}, nextRun: "next"}},
		// Not from the scheduler (HTTP mode, replayed by hand): the run is its own fire, now to
		// the second; no next fire is known, so nextRun stays.
		{name: "exists/not fired by the scheduler", exists: true, fire: "none", want: snapshotOutcome{cond: taken, opened: true,
			keys: rotated, last: fireKey, kept: keptTwo, nextRun: "before"}},
		{name: "exists/one-off: no next run", exists: true, oneOff: true, fire: "once", want: snapshotOutcome{cond: taken, opened: true,
			keys: rotated, last: fireKey, kept: keptTwo}},
		{name: "exists/30s ahead is clock skew", exists: true, fire: "skew", want: snapshotOutcome{cond: taken, opened: true,
			keys: rotated, last: fireKey, kept: keptTwo, nextRun: "next"}},

		// --- Rotation fails: the backup is there, the condition says the rotation failed, and
		// the event is retried.
		{name: "rotation/a delete fails", exists: true, deleteFail: true, want: snapshotOutcome{err: runner.ClassRetryable,
			cond: "False " + backupv1alpha1.ReasonRotationFailed, says: "deleting 1 of 2 old backups failed", opened: true,
			keys: append(slices.Clone(bystanders), olderBackups[0], olderBackups[2], fireKey), nextRun: "before"}},
		{name: "rotation/the listing fails", exists: true, listErr: errors.New("connection reset"), want: snapshotOutcome{err: runner.ClassRetryable,
			cond: "False " + backupv1alpha1.ReasonRotationFailed, says: "connection reset", opened: true, nextRun: "before"}},

		// --- Nothing to do.
		{name: "gone", absent: true, want: snapshotOutcome{nextRun: ""}},
		{name: "deleting", deleting: true, exists: true, want: snapshotOutcome{nextRun: "before"}},
		{name: "a new config of the same name", otherUID: true, exists: true, want: snapshotOutcome{nextRun: "before"}},
		// Unlike the schedule function, a name without a namespace is no error here: no config
		// has it, and a gone config's fire is settled.
		{name: "event/no namespace", event: "no namespace", exists: true, want: snapshotOutcome{nextRun: "before"}},

		// --- Refused: dead-lettered, nothing written.
		{name: "event/of no known kind", event: "invalid", exists: true, want: snapshotOutcome{err: runner.ClassPermanent, nextRun: "before"}},
		{name: "fire/a year ahead", fire: "ahead", exists: true, want: snapshotOutcome{err: runner.ClassPermanent, nextRun: "before"}},

		// --- Bad input: a condition, settled; the next fire tries again.
		{name: "config/keep 0", noKeep: true, exists: true, want: problem(backupv1alpha1.ReasonInvalidConfig, "spec.keep is 0", false)},
		{name: "destination/missing", dest: "nowhere", exists: true,
			want: problem(backupv1alpha1.ReasonUnknownDestination, `BackupDestination "nowhere" does not exist`, false)},
		{name: "destination/credentials secret missing", creds: "missing", exists: true,
			want: problem(backupv1alpha1.ReasonMissingCredentials, "secret garden/store-credentials does not exist", false)},
		{name: "destination/unknown type", destType: "azrue", exists: true,
			want: problem(backupv1alpha1.ReasonInvalidDestination, `unknown object store type "azrue"`, false)},
		{name: "destination/a credential key missing", openErr: fmt.Errorf("%w: token", objectstore.ErrMissingCredentials), exists: true,
			want: problem(backupv1alpha1.ReasonMissingCredentials, "missing credentials: token", true)},
		{name: "destination/credentials invalid", openErr: fmt.Errorf("%w: token is not base64", objectstore.ErrInvalidCredentials), exists: true,
			want: problem(backupv1alpha1.ReasonMissingCredentials, "token is not base64", true)},
		{name: "destination/bucket name invalid", openErr: fmt.Errorf("%w: Etcd_Backups", objectstore.ErrInvalidBucketName), exists: true,
			want: problem(backupv1alpha1.ReasonInvalidDestination, "invalid bucket name", true)},
		{name: "destination/no credentials needed", creds: "none", exists: true, want: snapshotOutcome{cond: taken, opened: true,
			keys: rotated, last: fireKey, kept: keptTwo, nextRun: "next"}},
		{name: "store/credentials rejected", statErr: objectstore.ErrUnauthenticated, exists: true,
			want: problem(backupv1alpha1.ReasonInvalidDestination, "unauthenticated", true)},
		{name: "store/not allowed", statErr: objectstore.ErrUnauthorized, exists: true,
			want: problem(backupv1alpha1.ReasonInvalidDestination, "unauthorized", true)},
		{name: "store/bucket missing", statErr: objectstore.ErrBucketNotFound, exists: true,
			want: problem(backupv1alpha1.ReasonInvalidDestination, "bucket not found", true)},
		// The TLS material is checked before etcd is dialled.
		{name: "tls/secret missing", tls: map[string]string{"missing": ""},
			want: problem(backupv1alpha1.ReasonInvalidTLS, "TLS secret team/etcd-client does not exist", true)},
		{name: "tls/garbage", tls: map[string]string{backupv1alpha1.TLSKeyCert: "not a cert", backupv1alpha1.TLSKeyKey: "SECRET-KEY-MATERIAL"},
			want: problem(backupv1alpha1.ReasonInvalidTLS, "are not a usable certificate and key", true)},
		{name: "tls/certificate without key", tls: map[string]string{backupv1alpha1.TLSKeyCert: "not a cert"},
			want: problem(backupv1alpha1.ReasonInvalidTLS, "tls.crt and tls.key go together", true)},
		{name: "tls/CA not PEM", tls: map[string]string{backupv1alpha1.TLSKeyCA: "SECRET-KEY-MATERIAL"},
			want: problem(backupv1alpha1.ReasonInvalidTLS, "ca.crt holds no PEM certificate", true)},
		{name: "tls/empty", tls: map[string]string{"unrelated": "x"},
			want: problem(backupv1alpha1.ReasonInvalidTLS, "has none of ca.crt, tls.crt, tls.key", true)},

		// --- The store fails: retried; the condition says so, nextRun waits for a success.
		{name: "store/fails", statErr: errors.New("connection reset"), exists: true, want: snapshotOutcome{err: runner.ClassRetryable,
			cond: "False " + backupv1alpha1.ReasonStoreFailed, says: "connection reset", opened: true, nextRun: "before"}},
		{name: "store/throttles", statErr: objectstore.ErrThrottled, exists: true, want: snapshotOutcome{err: runner.ClassUnavailable,
			cond: "False " + backupv1alpha1.ReasonStoreFailed, opened: true, nextRun: "before"}},
		// Shutting down: nothing written, the event comes again.
		{name: "cancelled", cancelled: true, exists: true, want: snapshotOutcome{err: runner.ClassRetryable, opened: true, nextRun: "before"}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// objects are the config, its destination and their secrets before the run.
func (tc snapshotRow) objects() []client.Object {
	cfg := &backupv1alpha1.EtcdBackupConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: fakeNamespace, Name: fakeName, UID: fakeUID, Generation: fakeGeneration},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{"http://127.0.0.1:1"}},
			Schedule: fakeCron, Keep: 2, Destination: fakeDestination},
	}
	before := metav1.NewTime(fireAt)
	cfg.Status.NextRun = &before
	switch {
	case tc.noKeep:
		cfg.Spec.Keep = 0
	case tc.keep != 0:
		cfg.Spec.Keep = tc.keep
	}
	if tc.oneOff {
		cfg.Spec.Schedule = ""
	}
	if tc.dest != "" {
		cfg.Spec.Destination = tc.dest
	}
	if tc.otherUID {
		cfg.UID = "uid-new"
	}
	if tc.deleting {
		cfg.Finalizers = []string{backupv1alpha1.Finalizer}
		cfg.DeletionTimestamp = &metav1.Time{Time: fakeNow.Add(-time.Minute)}
	}
	if tc.lastThis {
		cfg.Status.LastBackup = &backupv1alpha1.Backup{Key: fireKey, Time: metav1.NewTime(fireAt), Size: 4096, SHA256: strings.Repeat("ab", 32)}
	}
	if tc.newer {
		cfg.Status.LastBackup = &backupv1alpha1.Backup{Key: newerKey, Time: metav1.NewTime(fireAt.Add(10 * time.Minute)), Size: 4096}
	}
	dest := &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: fakeDestination},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: memType, Bucket: fakeBucket, Endpoint: fakeEndpoint,
			CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "store-credentials"}}}
	if tc.destType != "" {
		dest.Spec.Type = tc.destType
	}
	objs := []client.Object{dest}
	switch tc.creds {
	case "":
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "store-credentials"},
			Data: map[string][]byte{"token": []byte("s3cr3t")}})
	case "none":
		dest.Spec.CredentialsSecretRef = nil
	}
	if tc.tls != nil {
		cfg.Spec.Etcd.TLSSecretRef = &backupv1alpha1.LocalObjectReference{Name: "etcd-client"}
		if _, missing := tc.tls["missing"]; !missing {
			data := map[string][]byte{}
			for k, v := range tc.tls {
				data[k] = []byte(v)
			}
			objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fakeNamespace, Name: "etcd-client"}, Data: data})
		}
	}
	if !tc.absent {
		objs = append(objs, cfg)
	}
	return objs
}

func (tc snapshotRow) dueEvent(t *testing.T) cloudevents.Event {
	t.Helper()
	name := events.ObjectName(fakeNamespace, fakeName)
	if tc.event == "no namespace" {
		name = fakeName
	}
	e, err := events.NewEtcdBackupDueEvent("test", events.Ref{Name: name, UID: fakeUID, Generation: fakeGeneration}, fakeCron, fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if tc.event == "invalid" {
		e.SetExtension(events.ExtKind, "Pod")
	}
	return e
}

// context is the handler's: carrying the fire, as the worker passes it.
func (tc snapshotRow) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	if tc.cancelled {
		cancel()
	}
	fire := runner.Fire{At: fireAt, Next: fireNext}
	switch tc.fire {
	case "none":
		return ctx, cancel
	case "ahead":
		fire = runner.Fire{At: fireAt.AddDate(1, 0, 0)}
	case "once":
		fire.Next = time.Time{}
	}
	return runner.WithFire(ctx, fire), cancel
}

func (tc snapshotRow) run(t *testing.T) {
	seeded := slices.Concat(bystanders, olderBackups)
	if tc.exists {
		seeded = append(seeded, fireKey)
	}
	if tc.newer {
		seeded = append(seeded, newerKey)
	}
	store := newMemStore(seeded...)
	store.statErr, store.listErr = tc.statErr, tc.listErr
	if tc.deleteFail {
		store.deleteFails = map[string]error{olderBackups[0]: objectstore.ErrUnauthorized}
	}
	provider := &memProvider{store: store, openErr: tc.openErr}
	j := &journal{}
	c := newFakeClient(j, tc.objects()...)
	now := fakeNow
	switch tc.fire {
	case "none":
		now = fakeNow.Add(700 * time.Millisecond) // the run is its own fire, to the second
	case "skew":
		now = fakeNow.Add(-30 * time.Second) // the function's clock is behind the server's
	}
	s := &etcdbackup.Snapshotter{Client: c, Providers: objectstore.NewRegistry(provider), Log: zaptest.NewLogger(t),
		Now: func() time.Time { return now }}
	ctx, cancel := tc.context()
	defer cancel()

	err := s.Handle(ctx, tc.dueEvent(t))

	if got := classOf(err); got != tc.want.err {
		t.Errorf("error %v: class %q, want %q", err, got, tc.want.err)
	}
	if opened := provider.bucket != ""; opened != tc.want.opened {
		t.Errorf("the store opened: %v, want %v", opened, tc.want.opened)
	}
	if !tc.want.opened && store.calls > 0 {
		t.Errorf("the store was used %d times", store.calls)
	}
	if tc.want.opened {
		// The provider gets the secret's data and the destination's endpoint.
		want := map[string][]byte{"token": []byte("s3cr3t"), "endpoint": []byte(fakeEndpoint)}
		if tc.creds == "none" {
			delete(want, "token")
		}
		if provider.bucket != fakeBucket || !maps.EqualFunc(provider.credentials, want, slices.Equal) {
			t.Errorf("opened bucket %q with %q, want %q with %q", provider.bucket, provider.credentials, fakeBucket, want)
		}
	}
	wantKeys := tc.want.keys
	if wantKeys == nil {
		wantKeys = seeded
	}
	if got := store.keys(); !slices.Equal(got, slices.Sorted(slices.Values(wantKeys))) {
		t.Errorf("the store holds %q, want %q", got, slices.Sorted(slices.Values(wantKeys)))
	}

	live, cond := liveCondition(t, c, fakeNamespace, fakeName, backupv1alpha1.ConditionBackupSucceeded)
	if tc.want.cond == "" && j.count("status") > 0 {
		t.Errorf("the status was written: %q", j.all())
	}
	if live == nil {
		if !tc.absent {
			t.Fatal("the config is gone")
		}
		return
	}
	got := ""
	if cond != nil {
		got = string(cond.Status) + " " + cond.Reason
	}
	if got != tc.want.cond {
		t.Fatalf("BackupSucceeded %q, want %q (%+v)", got, tc.want.cond, cond)
	}
	if cond != nil && (!strings.Contains(cond.Message, tc.want.says) || strings.Contains(cond.Message, "SECRET-KEY-MATERIAL") ||
		strings.Contains(cond.Message, "s3cr3t")) {
		t.Errorf("BackupSucceeded says %q, want it to say %q and to quote no secret", cond.Message, tc.want.says)
	}
	tc.checkBackups(t, live)
}

// checkBackups checks what the status says of the backups and of the next run.
func (tc snapshotRow) checkBackups(t *testing.T, live *backupv1alpha1.EtcdBackupConfig) {
	t.Helper()
	st := live.Status
	switch {
	case tc.want.last == "" && st.LastBackup != nil && !tc.lastThis && !tc.newer:
		t.Errorf("lastBackup %+v, want none", st.LastBackup)
	case tc.want.last != "" && (st.LastBackup == nil || st.LastBackup.Key != tc.want.last):
		t.Errorf("lastBackup %+v, want %s", st.LastBackup, tc.want.last)
	case tc.want.last == fireKey:
		size, sha := int64(len("backup of "+fireKey)), ""
		if tc.lastThis { // as it was taken, not as a Stat sees it
			size, sha = 4096, strings.Repeat("ab", 32)
		}
		if st.LastBackup.Size != size || st.LastBackup.SHA256 != sha || !st.LastBackup.Time.Time.Equal(fireAt) {
			t.Errorf("lastBackup %+v, want %d bytes, sha %q, at %s", st.LastBackup, size, sha, fireAt)
		}
	}
	var kept []string
	for _, b := range st.Backups {
		kept = append(kept, b.Key)
	}
	if !slices.Equal(kept, tc.want.kept) || int(st.BackupCount) != len(tc.want.kept) {
		t.Errorf("backups %q (count %d), want %q", kept, st.BackupCount, tc.want.kept)
	}
	var want *time.Time
	switch tc.want.nextRun {
	case "next":
		want = &fireNext
	case "before":
		want = &fireAt
	}
	switch {
	case want == nil && st.NextRun != nil:
		t.Errorf("nextRun %s, want none", st.NextRun)
	case want != nil && (st.NextRun == nil || !st.NextRun.Time.Equal(*want)):
		t.Errorf("nextRun %v, want %s", st.NextRun, want)
	}
}
