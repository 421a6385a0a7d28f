package entry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// The decisions of the purge function when the NATS server fires a purge: it takes no
// event's word, checks the live entry (there, the same uid, deleting, ours, this
// installation's, not migrated, due), opens the bucket with the right credentials and deletes
// exactly the entry's prefix, then releases the entry and says so.

type purgeRow struct {
	name     string
	world    world
	absent   bool // no entry
	otherUID bool // the live entry is a re-created namesake
	// replaced: while the prefix is listed, another worker purges and releases the entry, and a
	// namesake (another uid) is created and writes backups under the same prefix.
	replaced bool
	migrated bool   // lastOperation Migrate Succeeded
	noUID    bool   // the event's data names no uid
	outside  string // the store lists this key under every prefix
	locked   bool   // the entry's newest backup is locked for an hour
	listErr  error
	openErr  error

	purged    bool
	entry     string   // the entry afterwards: "gone", "released" (others' finalizers only), "kept" (ours still on)
	op        string   // lastOperation afterwards, "Type State", checked when set
	opened    []string // the credentials the store was opened with
	published []string
	err       runner.Class
	codes     []gardencorev1beta1.ErrorCode
}

func TestPurgeDecisions(t *testing.T) {
	deleting := world{deleting: true, ours: true}
	with := func(change func(*world)) world { w := deleting; change(&w); return w }
	source := gardener.SourcePrefix + fastEntry
	for _, tc := range []purgeRow{
		{name: "due: exactly the prefix purged with the bucket's credentials, released", world: deleting, purged: true, entry: "gone",
			opened: []string{"bucket"}, published: []string{"completed"}},
		{name: "due, another controller's finalizer: released, Delete Succeeded", world: with(func(w *world) { w.other = true }), purged: true,
			entry: "released", op: "Delete Succeeded", opened: []string{"bucket"}, published: []string{"completed"}},
		{name: "no BackupBucket: the entry's own credentials", world: with(func(w *world) { w.noBucket = true }), purged: true, entry: "gone",
			opened: []string{"entry"}, published: []string{"completed"}},
		{name: "source- entry: its own credentials, the prefix without source-", world: with(func(w *world) { w.name = source }), purged: true,
			entry: "gone", opened: []string{"entry"}, published: []string{"completed"}},
		{name: "source- entry whose live namesake uses the bucket: released, nothing purged", world: with(func(w *world) {
			w.name, w.extra = source, []client.Object{&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: fastEntry},
				Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: fastBucket}}}
		}), entry: "gone"},
		// Not this purge's to do: nothing touched, the event settled.
		{name: "not due yet: the retention was extended", world: with(func(w *world) { w.ann = map[string]string{entry.AnnotationRetention: "1h"} }), entry: "kept"},
		{name: "entry gone", absent: true, entry: "gone"},
		{name: "re-created namesake (another uid) untouched", world: deleting, otherUID: true, entry: "kept"},
		{name: "released and re-created while the prefix was listed: the namesake's backups untouched, read again", world: deleting, replaced: true,
			entry: "kept", opened: []string{"bucket"}, err: runner.ClassRetryable},
		{name: "not deleting", world: world{ours: true}, entry: "kept"},
		{name: "released already", world: world{deleting: true, other: true}, entry: "released"},
		{name: "migrated to another seed, which owns its backups", world: deleting, migrated: true, entry: "kept", op: "Migrate Succeeded"},
		{name: "of a type this installation does not serve", world: with(func(w *world) { w.typ = "aws" }), entry: "kept"},
		{name: "no uid in the event: dead-lettered", world: deleting, noUID: true, entry: "kept", err: runner.ClassPermanent},
		// Failures: recorded in lastOperation and lastError; the entry keeps its finalizer.
		{name: "malformed retention: a configuration problem", world: with(func(w *world) { w.ann = map[string]string{entry.AnnotationRetention: "soon"} }),
			entry: "kept", op: "Delete Error", err: runner.ClassPermanent, codes: conf},
		{name: "the store lists outside the prefix: refused, nothing deleted", world: deleting, outside: neighbours[1], entry: "kept", op: "Delete Error",
			opened: []string{"bucket"}, published: []string{"failed"}, err: runner.ClassPermanent},
		{name: "the store throttles: unavailable", world: deleting, listErr: objectstore.ErrThrottled, entry: "kept", op: "Delete Error",
			opened: []string{"bucket"}, err: runner.ClassUnavailable, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraRateLimitsExceeded}},
		{name: "bad credentials: a configuration problem, purge.failed", world: deleting, openErr: objectstore.ErrMissingCredentials, entry: "kept",
			op: "Delete Error", opened: []string{"bucket"}, published: []string{"failed"}, err: runner.ClassPermanent, codes: conf},
		// Object lock: what it keeps is marked, the entry released, a verify purge due when the lock ends.
		{name: "locked backups: marked, verify scheduled after the lock, released", world: deleting, locked: true, entry: "gone",
			opened: []string{"bucket"}, published: []string{"schedule verify " + at(fastNow.Add(time.Hour+time.Second)), "completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func (tc purgeRow) run(t *testing.T) {
	ctx := context.Background()
	w := tc.world
	objs := w.objects(t)
	live := objs[0].(*extensionsv1alpha1.BackupEntry)
	if tc.otherUID {
		live.UID = "uid-namesake"
	}
	if tc.migrated {
		live.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeMigrate, State: gardencorev1beta1.LastOperationStateSucceeded}
	}
	if tc.absent {
		objs = objs[1:]
	}
	c := (&apiServer{}).newEntryClient(objs...)
	js := &recordingJetStream{}
	store := newMemStore(slices.Concat(ours, neighbours)...)
	store.listErr, store.outside = tc.listErr, tc.outside
	var opened objectstore.Store = store
	if tc.locked {
		store.locked[ours[1]], store.lockedUntil = true, fastNow.Add(time.Hour)
		opened = lockingStore{store}
	}
	if tc.replaced {
		store.beforeList = func() { replaceEntry(t, c, live.Name) }
	}
	mem := &memProvider{store: opened, openErr: tc.openErr}
	log := zaptest.NewLogger(t)
	p := &entry.Purger{Client: c, Providers: objectstore.NewRegistry(mem), JetStream: js, Cluster: "test",
		Scope: gardener.Scope{Types: []string{memType}, Classes: []string{"shoot"}}, Entries: entry.StatusWriter(c, log),
		Log: log, Now: func() time.Time { return fastNow }, ProgressInterval: time.Hour}
	name := w.entryName()
	data := events.PurgeData{Entry: name, UID: fastUID, BucketName: fastBucket, Prefix: gardener.EntryPrefix(name), DueAt: deletedAt}
	if tc.noUID {
		data.UID = ""
	}
	ref := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, UID: fastUID}}
	e, err := events.NewPurgeEvent("test", events.OpPurgeDue, kube.Ref(events.KindBackupEntry, ref), data, fastNow)
	if err != nil {
		t.Fatal(err)
	}

	err = p.Handle(ctx, e)

	checkErr(t, err, tc.err, tc.codes)
	if tc.replaced {
		if !errors.Is(err, gardener.ErrObjectChanged) {
			t.Errorf("error %v, want one that says the entry changed", err)
		}
		if after := liveEntry(t, c, name); after == nil || after.UID != "uid-namesake" || after.Status.LastOperation != nil {
			t.Errorf("the namesake is %+v, want it as it was created, without status", after)
		}
	}
	if tc.locked {
		if got := store.keys(); !slices.Equal(got, slices.Sorted(slices.Values(append([]string{ours[1]}, neighbours...)))) || !slices.Equal(store.marked, ours[1:]) {
			t.Errorf("the store holds %q, marked %q; want the locked backup kept, marked, and the neighbours", got, store.marked)
		}
	} else {
		checkStore(t, store, tc.purged)
	}
	if !slices.Equal(mem.opened, tc.opened) {
		t.Errorf("store opened with the credentials of %q, want %q", mem.opened, tc.opened)
	}
	var got []string
	for _, m := range js.msgs {
		got = append(got, publishedAs(t, name, m))
	}
	if !slices.Equal(got, tc.published) {
		t.Errorf("published %q, want %q", got, tc.published)
	}
	after := liveEntry(t, c, name)
	state := "gone"
	switch {
	case after != nil && controllerutil.ContainsFinalizer(after, entry.Finalizer):
		state = "kept"
	case after != nil:
		state = "released"
	}
	if state != tc.entry {
		t.Fatalf("the entry is %s, want %s", state, tc.entry)
	}
	if after != nil && tc.op != "" {
		op := after.Status.LastOperation
		if op == nil || string(op.Type)+" "+string(op.State) != tc.op {
			t.Errorf("lastOperation %+v, want %s", op, tc.op)
		}
		if le := after.Status.LastError; strings.HasSuffix(tc.op, "Error") && (le == nil || !slices.Equal(le.Codes, tc.codes)) {
			t.Errorf("lastError %+v, want one with codes %q", le, tc.codes)
		}
	}
	creds := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "entry-creds"}, creds); err != nil {
		t.Fatal(err)
	}
	if released := !controllerutil.ContainsFinalizer(creds, entry.Finalizer); released != (tc.entry != "kept" && !tc.absent && !strings.HasPrefix(tc.name, "released")) {
		t.Errorf("the entry's secret released: %v (finalizers %q)", released, creds.Finalizers)
	}
}

// replaceEntry does what another worker and gardenlet may do while a purge lists the prefix of
// the entry name: the entry is released and goes, and a namesake (another uid, our finalizer)
// takes its name; its backups land under the same prefix (the store's keys stay as they were).
func replaceEntry(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	old := liveEntry(t, c, name)
	old.Finalizers = nil
	if err := c.Update(ctx, old); err != nil {
		t.Fatalf("releasing %s: %v", name, err)
	}
	if gone := liveEntry(t, c, name); gone != nil {
		t.Fatalf("%s still there after its release: %+v", name, gone.ObjectMeta)
	}
	namesake := old.DeepCopy()
	namesake.ObjectMeta = metav1.ObjectMeta{Name: name, UID: "uid-namesake", Finalizers: []string{entry.Finalizer}}
	namesake.Status = extensionsv1alpha1.BackupEntryStatus{}
	if err := c.Create(ctx, namesake); err != nil {
		t.Fatalf("creating the namesake %s: %v", name, err)
	}
}
