package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const cluster = "test-seed"

// testScope is the bridge's scope unless a test says otherwise.
var testScope = gardener.Scope{Types: gardener.ImplementedTypes, Classes: []string{"shoot"}}

// harness is a real kube-apiserver and nats-server with the streams, and a way to read them.
type harness struct {
	t   testing.TB
	env *testenv.Env
	c   client.Client
	nc  *nats.Conn
	js  jetstream.JetStream
	// reg is where the bridges started register their metrics (nil: nowhere).
	reg prometheus.Registerer
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOn(t, 0)
}

// newHarnessOn is newHarness with natsNodes nats-server processes (testenv.WithNATSCluster),
// the streams replicated on each; 0: one embedded nats-server.
func newHarnessOn(t testing.TB, natsNodes int) *harness {
	t.Helper()
	nats := testenv.WithNATS()
	if natsNodes > 0 {
		nats = testenv.WithNATSCluster(natsNodes)
	}
	env := testenv.Start(t, testenv.WithKube(), nats)
	nc, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, events.WithReplicas(max(natsNodes, 1))); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, env: env, c: env.Client(t), nc: nc, js: js}
}

// start runs a bridge until the returned stop function is called.
func (h *harness) start(opts Options) (*Bridge, func()) {
	h.t.Helper()
	return h.startWith(h.env.Kube.Config, opts)
}

// startWith runs a bridge talking to the API server through cfg.
func (h *harness) startWith(cfg *rest.Config, opts Options) (*Bridge, func()) {
	h.t.Helper()
	opts.Cluster = cluster
	opts.Logger = zaptest.NewLogger(h.t)
	if len(opts.Scope.Types) == 0 {
		opts.Scope = testScope
	}
	b, err := New(cfg, h.js, h.reg, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	h.eventually(10*time.Second, "bridge synced", b.Synced)
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	h.t.Cleanup(stop)
	return b, stop
}

type received struct {
	subject string
	header  nats.Header
	event   cloudevents.Event
}

// stream reads every event in the stream of record, in order, decoding each.
func (h *harness) stream() []received {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := h.js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []received
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			h.t.Fatal(err)
		}
		for msg := range batch.Messages() {
			e, err := events.Decode(msg.Headers(), msg.Data())
			if err != nil {
				h.t.Fatalf("stream holds an event that does not decode: %v", err)
			}
			out = append(out, received{subject: msg.Subject(), header: msg.Headers(), event: e})
			pending--
		}
		if batch.Error() != nil {
			h.t.Fatal(batch.Error())
		}
	}
	return out
}

// typesOf lists the event types published for the object with this uid, in order.
func typesOf(rs []received, uid string) []string {
	var types []string
	for _, r := range rs {
		if r.event.Extensions()[events.ExtUID] == uid {
			types = append(types, r.event.Type())
		}
	}
	return types
}

func (h *harness) eventually(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	testenv.Eventually(h.t, timeout, what, func() (bool, string) { return cond(), "" })
}

func bucket(name, providerType string) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			Region:      "westeurope",
			SecretRef:   corev1.SecretReference{Name: "backup-" + name, Namespace: "garden"},
		},
	}
}

func entry(name, providerType string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			BucketName:  "seed-bucket",
			Region:      "westeurope",
			SecretRef:   corev1.SecretReference{Name: "backup-seed-bucket", Namespace: "garden"},
		},
	}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := h.c.Create(context.Background(), obj); err != nil {
		h.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (h *harness) patch(obj client.Object, mutate func()) {
	h.t.Helper()
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	if err := h.c.Patch(context.Background(), obj, client.MergeFrom(base)); err != nil {
		h.t.Fatalf("patching %s: %v", obj.GetName(), err)
	}
}

func TestBridgePublishesLifecycleOfHandledObjects(t *testing.T) {
	h := newHarness(t)
	existing := bucket("seed-bucket", "azure")
	h.create(existing)
	_, _ = h.start(Options{Scope: gardener.Scope{Types: []string{"azure"}, Classes: []string{"shoot"}}, RecordDeletions: true})

	e := entry("shoot--dev--app--1a2b", "azure")
	h.create(e)
	h.create(bucket("other-provider", "aws"))
	seedClass := entry("shoot--dev--seedclass--3c4d", "azure")
	seedClass.Spec.Class = ptr.To(extensionsv1alpha1.ExtensionClassSeed)
	h.create(seedClass)
	uid := string(e.UID)
	h.eventually(10*time.Second, "created events", func() bool { return len(typesOf(h.stream(), uid)) == 1 })

	// Writes that carry no new desired state publish nothing.
	h.patch(e, func() {
		e.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: "Create", State: "Succeeded", Progress: 100,
			Description: "done", LastUpdateTime: metav1.Now()}
	})
	if err := h.c.Status().Update(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	h.patch(e, func() {
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, "gardener.cloud/timestamp", time.Now().Format(time.RFC3339Nano))
	})

	// A spec change, the operation annotation, a finalizer taken away, deletion and removal
	// publish; a finalizer added does not (the function that adds it has the object at hand).
	h.patch(e, func() { e.Spec.Region = "northeurope" })
	h.eventually(10*time.Second, "updated event", func() bool { return len(typesOf(h.stream(), uid)) == 2 })
	h.patch(e, func() { metav1.SetMetaDataAnnotation(&e.ObjectMeta, "gardener.cloud/operation", "reconcile") })
	h.eventually(10*time.Second, "updated event", func() bool { return len(typesOf(h.stream(), uid)) == 3 })
	// The function removing the operation annotation and gardenlet confirming the deletion
	// publish nothing either.
	h.patch(e, func() { delete(e.Annotations, "gardener.cloud/operation") })
	h.patch(e, func() { metav1.SetMetaDataAnnotation(&e.ObjectMeta, "confirmation.gardener.cloud/deletion", "true") })
	h.patch(e, func() { e.Finalizers = []string{"extensions.gardener.cloud/backupentry", "gardener"} })
	h.patch(e, func() { e.Finalizers = []string{"extensions.gardener.cloud/backupentry"} })
	h.patch(e, func() { e.Finalizers = []string{"extensions.gardener.cloud/backupentry", "gardener"} })
	if err := h.c.Delete(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	h.eventually(10*time.Second, "deleting event", func() bool { return len(typesOf(h.stream(), uid)) == 5 })
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(e), e); err != nil {
		t.Fatal(err)
	}
	lastRV := e.ResourceVersion
	h.patch(e, func() { e.Finalizers = nil })
	h.eventually(10*time.Second, "deleted event", func() bool { return len(typesOf(h.stream(), uid)) == 6 })

	all := h.stream()
	want := []string{events.TypeEntryCreated, events.TypeEntryUpdated, events.TypeEntryUpdated,
		events.TypeEntryUpdated, events.TypeEntryDeleting, events.TypeEntryDeleted}
	if got := typesOf(all, uid); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("entry events:\n got %v\nwant %v", got, want)
	}
	if got := typesOf(all, string(existing.UID)); len(got) != 1 || got[0] != events.TypeBucketSynced {
		t.Errorf("bucket existing at start: events %v, want one synced", got)
	}
	for _, r := range all {
		name := r.event.Extensions()[events.ExtName]
		if name == "other-provider" || name == seedClass.Name {
			t.Errorf("%s is not handled (type/class) but was published as %s", name, r.event.Type())
		}
		wantSubject, _ := events.Subject(r.event.Type(), r.event.Subject())
		if r.subject != wantSubject || r.header.Get(events.HeaderMsgID) != r.event.ID() {
			t.Errorf("event %s on %s with Nats-Msg-Id %s, want subject %s and the event id", r.event.ID(), r.subject, r.header.Get(events.HeaderMsgID), wantSubject)
		}
		if r.event.Source() != events.Source(cluster) {
			t.Errorf("source %q, want %q", r.event.Source(), events.Source(cluster))
		}
		if strings.Contains(string(r.event.Data()), "managedFields") {
			t.Errorf("%s data carries managedFields", r.event.Type())
		}
	}
	// The deleting event's id is the hash of (cluster, uid, resourceVersion, operation).
	for _, r := range all {
		if r.event.Type() == events.TypeEntryDeleting && r.event.Extensions()[events.ExtResourceVersion] == lastRV {
			if want := events.ID(cluster, uid, lastRV, "deleting"); r.event.ID() != want {
				t.Errorf("deleting event id %s, want %s", r.event.ID(), want)
			}
		}
	}
	// The data is the object's snapshot.
	var snapshot extensionsv1alpha1.BackupEntry
	last := all[len(all)-1]
	if err := json.Unmarshal(last.event.Data(), &snapshot); err != nil || snapshot.Spec.Region != "northeurope" || snapshot.Name != e.Name {
		t.Errorf("deleted event data = %s (%v)", last.event.Data(), err)
	}
}

// A restart does not announce again objects with nothing outstanding whose last event in the
// stream of record has their inputs: no event, no function run for them, whether or not
// JetStream's duplicate window still holds their ids. Objects with work outstanding (never
// reconciled, failed, deleting) are announced anew: their last event may have been
// dead-lettered or lost with a worker, and nothing else would try them again.
func TestBridgeRestartReannouncesOnlyOutstandingWork(t *testing.T) {
	h := newHarness(t)
	const settled = 20
	for i := range settled {
		e := entry(fmt.Sprintf("shoot--dev--s%d--%d", i, i), "azure")
		h.create(e)
		h.succeed(e)
	}
	failed, fresh, deleting := entry("shoot--dev--failed--1", "azure"), entry("shoot--dev--fresh--1", "azure"), entry("shoot--dev--deleting--1", "azure")
	deleting.Finalizers = []string{"extensions.gardener.cloud/test"}
	for _, e := range []*extensionsv1alpha1.BackupEntry{failed, fresh, deleting} {
		h.create(e)
	}
	h.succeed(deleting)
	failed.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeReconcile,
		State: gardencorev1beta1.LastOperationStateError, LastUpdateTime: metav1.Now()}
	if err := h.c.Status().Update(context.Background(), failed); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(context.Background(), deleting); err != nil {
		t.Fatal(err)
	}
	const all = settled + 3
	first, stop := h.start(Options{})
	h.eventually(10*time.Second, "first synced events", func() bool {
		return testutil.ToFloat64(first.metrics.published.WithLabelValues(events.TypeEntrySynced)) == all
	})
	stop()
	before := h.stream()

	second, _ := h.start(Options{})
	h.eventually(10*time.Second, "second synced events acknowledged", func() bool {
		return testutil.ToFloat64(second.metrics.published.WithLabelValues(events.TypeEntrySynced)) == all-settled
	})
	if unchanged := testutil.ToFloat64(second.metrics.unchanged); unchanged != settled {
		t.Errorf("%v entries found unchanged after the restart, want the %d settled ones", unchanged, settled)
	}
	if dups := testutil.ToFloat64(second.metrics.duplicates); dups != 0 {
		t.Errorf("JetStream reported %v duplicates after the restart, want none: settled entries are not published again", dups)
	}
	after := h.stream()
	if len(after) != len(before)+3 {
		t.Errorf("stream grew from %d to %d events on restart, want by the 3 entries with work outstanding", len(before), len(after))
	}
	for _, e := range []*extensionsv1alpha1.BackupEntry{failed, fresh, deleting} {
		if n, was := len(typesOf(after, string(e.UID))), len(typesOf(before, string(e.UID))); n != was+1 {
			t.Errorf("%s: %d events after the restart, %d before: want one more", e.Name, n, was)
		}
	}
}

// By default a deletion is recorded by the deleting event alone: an object gone from the API
// server publishes nothing, and a bridge starting later forgets what it recalls of it.
func TestBridgeRecordsNoDeletedEventUnlessAsked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	gone := entry("shoot--dev--gone--1", "azure")
	gone.Finalizers = []string{"extensions.gardener.cloud/test"}
	h.create(gone)
	first, stop := h.start(Options{})
	uid := string(gone.UID)
	h.eventually(10*time.Second, "synced event", func() bool { return len(typesOf(h.stream(), uid)) == 1 })
	if err := h.c.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	h.eventually(10*time.Second, "deleting event", func() bool { return len(typesOf(h.stream(), uid)) == 2 })
	h.patch(gone, func() { gone.Finalizers = nil })
	// The informer hands its notifications over in order: once the entry created after the
	// removal is announced, the removal was handled.
	after := entry("shoot--dev--after--1", "azure")
	h.create(after)
	h.eventually(10*time.Second, "the later entry's created event", func() bool { return len(typesOf(h.stream(), string(after.UID))) == 1 })
	want := []string{events.TypeEntrySynced, events.TypeEntryDeleting}
	if got := typesOf(h.stream(), uid); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("deleted entry's events:\n got %v\nwant %v", got, want)
	}
	key := string(events.KindBackupEntry) + "/" + uid
	if _, ok := first.announced.inputs(key); ok {
		t.Errorf("the bridge that saw %s go still holds its last inputs", gone.Name)
	}
	stop()

	// The stream's last event of the gone entry is its deleting one; the next term recalls it
	// and forgets it once its informers list no such entry.
	second, _ := h.start(Options{})
	if _, ok := second.announced.inputs(key); ok {
		t.Errorf("the next bridge holds the last inputs of %s, which no informer lists", gone.Name)
	}
	if _, ok := second.announced.inputs(string(events.KindBackupEntry) + "/" + string(after.UID)); !ok {
		t.Errorf("the next bridge does not recall %s, which exists: the check above observes nothing", after.Name)
	}
}

// What changed while no bridge watched is announced at the next start, and only that: an
// entry's credentials rotated, the namespace an entry waited for created. Entries announced when
// they were created and settled afterwards by their function (status, finalizer, gardenlet's
// reconcile annotation set and consumed) are not, at the start nor at a periodic resync.
func TestBridgeRestartAnnouncesWhatChangedWhileNoBridgeWatched(t *testing.T) {
	h := newHarness(t)
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-seed-bucket", Namespace: "garden"},
		Data: map[string][]byte{"storageKey": []byte("one")}}
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-rotated", Namespace: "garden"},
		Data: map[string][]byte{"storageKey": []byte("one")}}
	h.create(shared)
	h.create(own)

	_, stop := h.start(Options{})
	rotated, late := entry("shoot--dev--rotated--1", "azure"), entry("shoot--dev--late--2", "azure")
	rotated.Spec.SecretRef.Name = own.Name
	reconciled, plain := entry("shoot--dev--reconciled--3", "azure"), entry("shoot--dev--plain--4", "azure")
	all := []*extensionsv1alpha1.BackupEntry{rotated, late, reconciled, plain}
	for _, e := range all {
		h.create(e)
	}
	h.eventually(10*time.Second, "created events", func() bool {
		rs := h.stream()
		return !slices.ContainsFunc(all, func(e *extensionsv1alpha1.BackupEntry) bool { return len(typesOf(rs, string(e.UID))) != 1 })
	})
	// What the entry function does: its finalizer, its status; gardenlet's reconcile annotation,
	// announced, and consumed.
	for _, e := range all {
		h.patch(e, func() { e.Finalizers = []string{"extensions.gardener.cloud/backupentry"} })
		h.succeed(e)
	}
	h.patch(reconciled, func() { metav1.SetMetaDataAnnotation(&reconciled.ObjectMeta, operationAnnotation, "reconcile") })
	h.eventually(10*time.Second, "the reconcile annotation announced", func() bool { return len(typesOf(h.stream(), string(reconciled.UID))) == 2 })
	h.patch(reconciled, func() { delete(reconciled.Annotations, operationAnnotation) })
	h.succeed(reconciled)
	time.Sleep(time.Second) // the informers saw the function's writes (none is announced)
	stop()
	before := h.stream()

	h.patch(own, func() { own.Data["storageKey"] = []byte("two") })
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--late"}})

	second, _ := h.start(Options{ResyncPeriod: time.Second})
	h.eventually(10*time.Second, "the changed entries announced", func() bool {
		rs := h.stream()
		return len(typesOf(rs, string(rotated.UID))) == len(typesOf(before, string(rotated.UID)))+1 &&
			len(typesOf(rs, string(late.UID))) == len(typesOf(before, string(late.UID)))+1
	})
	time.Sleep(3 * time.Second) // three periodic resyncs
	after := h.stream()
	if len(after) != len(before)+2 {
		t.Errorf("the stream grew from %d to %d events, want by the 2 entries whose inputs changed", len(before), len(after))
	}
	for _, e := range []*extensionsv1alpha1.BackupEntry{reconciled, plain} {
		if n, was := len(typesOf(after, string(e.UID))), len(typesOf(before, string(e.UID))); n != was {
			t.Errorf("%s: announced again (%d events, %d before), though nothing changed since its last event", e.Name, n, was)
		}
	}
	if unchanged := testutil.ToFloat64(second.metrics.unchanged); unchanged < 2*3 {
		t.Errorf("%v objects counted unchanged, want the 2 settled entries at the start and at each resync", unchanged)
	}
	for _, r := range after[len(before):] {
		if r.event.Type() != events.TypeEntrySynced {
			t.Errorf("%s announced as %s, want %s", r.event.Subject(), r.event.Type(), events.TypeEntrySynced)
		}
		if slices.ContainsFunc(before, func(b received) bool { return b.event.ID() == r.event.ID() }) {
			t.Errorf("%s announced again under an id the stream holds: JetStream would drop it as a duplicate", r.event.Subject())
		}
	}
}

// succeed writes e's status as the entry function does once it reconciled e.
func (h *harness) succeed(e *extensionsv1alpha1.BackupEntry) {
	h.t.Helper()
	e.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeReconcile,
		State: gardencorev1beta1.LastOperationStateSucceeded, LastUpdateTime: metav1.Now(), Progress: 100}
	e.Status.ObservedGeneration = e.Generation
	if err := h.c.Status().Update(context.Background(), e); err != nil {
		h.t.Fatalf("status of %s: %v", e.Name, err)
	}
}

func TestBridgeAnnouncesEntryAgainWhenItsNamespaceAppears(t *testing.T) {
	h := newHarness(t)
	e := entry("shoot--dev--late--9f8e", "azure")
	h.create(e)
	_, _ = h.start(Options{})
	h.eventually(10*time.Second, "synced event", func() bool { return len(typesOf(h.stream(), string(e.UID))) == 1 })

	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--late"}})
	h.eventually(10*time.Second, "re-announcement", func() bool { return len(typesOf(h.stream(), string(e.UID))) == 2 })
	rs := h.stream()
	got := typesOf(rs, string(e.UID))
	if got[1] != events.TypeEntrySynced {
		t.Errorf("re-announcement type %s, want %s", got[1], events.TypeEntrySynced)
	}
	if rs[len(rs)-1].event.ID() == rs[0].event.ID() {
		t.Error("re-announcement reuses the first event's id: JetStream would drop it")
	}
}

// The bridge publishes nothing until every initial list is in. Otherwise a bucket being
// deleted, listed before its last entry was deleted and the entries listed after, was announced
// while the entry still existed; the bucket function found it, waited for its deletion, and no
// watch ever reported that deletion (it came before the entries' list).
func TestBridgePublishesNothingBeforeEveryListIsIn(t *testing.T) {
	h := newHarness(t)
	doomed := bucket("seed-bucket", "azure")
	doomed.Finalizers = []string{"extensions.gardener.cloud/backupbucket"}
	h.create(doomed)
	last := entry("shoot--dev--last--1", "azure")
	h.create(last)
	if err := h.c.Delete(context.Background(), doomed); err != nil {
		t.Fatal(err)
	}

	// The bridge's first request for entries (its list) waits until released.
	release := make(chan struct{})
	var held sync.Once
	cfg := rest.CopyConfig(h.env.Kube.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/backupentries") {
				held.Do(func() { <-release })
			}
			return rt.RoundTrip(req)
		})
	})
	opts := Options{Cluster: cluster, Scope: testScope, Logger: zaptest.NewLogger(t)}
	b, err := New(cfg, h.js, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	h.eventually(10*time.Second, "the bucket in the bridge's cache", func() bool {
		_, exists, _ := b.informerOf(events.KindBackupBucket).GetStore().GetByKey(doomed.Name)
		return exists
	})
	time.Sleep(time.Second) // time enough to publish, were publishing not held
	if rs := h.stream(); len(rs) != 0 {
		t.Errorf("%d events published while the entries were not listed yet (first: %s of %s)", len(rs), rs[0].event.Type(), rs[0].event.Subject())
	}
	if err := h.c.Delete(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	close(release)

	h.eventually(10*time.Second, "bridge synced", b.Synced)
	h.eventually(10*time.Second, "the bucket announced", func() bool { return len(typesOf(h.stream(), string(doomed.UID))) > 0 })
	if got := typesOf(h.stream(), string(last.UID)); len(got) != 0 {
		t.Errorf("the entry deleted before the entries were listed was announced: %v", got)
	}
}

func TestResyncRequestReemitsEveryObject(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.create(bucket(fmt.Sprintf("bucket-%d", i), "azure"))
	}
	b, _ := h.start(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.ServeResync(ctx, h.nc) }()
	h.eventually(10*time.Second, "synced events", func() bool { return len(h.stream()) == 5 })

	var reply *nats.Msg
	h.eventually(10*time.Second, "resync answered", func() bool {
		var err error
		reply, err = h.nc.Request(events.SubjectResync, nil, time.Second)
		return err == nil
	})
	var r events.ResyncReply
	if err := json.Unmarshal(reply.Data, &r); err != nil || r.Queued != 5 {
		t.Fatalf("resync reply %s (%v), want 5 queued", reply.Data, err)
	}
	h.eventually(10*time.Second, "re-emitted events", func() bool { return len(h.stream()) == 10 })
}

// While nats-server is down for 20 s, 200 entries are created, updated and half of them
// deleted; once it is back, every entry's final state reaches the stream.
func TestBridgeDeliversFinalStateAfterNATSOutage(t *testing.T) {
	h := newHarness(t)
	b, _ := h.start(Options{MaxRetryDelay: 2 * time.Second, RecordDeletions: true})
	ctx := context.Background()

	outageStart := time.Now()
	h.env.NATS.Stop()
	const n = 200
	entries := make([]*extensionsv1alpha1.BackupEntry, n)
	for i := range n {
		entries[i] = entry(fmt.Sprintf("shoot--outage--s%03d--%d", i, i), "azure")
		h.create(entries[i])
	}
	for _, e := range entries {
		h.patch(e, func() { e.Spec.Region = "northeurope" })
	}
	for _, e := range entries[:n/2] {
		if err := h.c.Delete(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually(10*time.Second, "all changes queued", func() bool { return b.Pending() == n })
	time.Sleep(20*time.Second - time.Since(outageStart))
	if err := h.env.NATS.Start(); err != nil {
		t.Fatal(err)
	}
	h.eventually(30*time.Second, "queue drained after NATS returned", func() bool { return b.Pending() == 0 })

	last := map[string]cloudevents.Event{}
	for _, r := range h.stream() {
		last[r.event.Extensions()[events.ExtUID].(string)] = r.event
	}
	for i, e := range entries {
		got, ok := last[string(e.UID)]
		switch {
		case !ok:
			t.Errorf("%s: no event reached the stream", e.Name)
		case i < n/2 && got.Type() != events.TypeEntryDeleted:
			t.Errorf("%s was deleted; its last event is %s", e.Name, got.Type())
		case i >= n/2 && got.Extensions()[events.ExtGeneration] != fmt.Sprint(e.Generation):
			t.Errorf("%s is at generation %d; its last event (%s) says %v", e.Name, e.Generation, got.Type(), got.Extensions()[events.ExtGeneration])
		}
	}
}

// A bucket that found its secret missing, or whose credentials are corrected, is announced
// again; a bucket that has not tried yet finds its secret itself and is not (gardenlet creates
// the secret, then the object); metadata-only secret updates (gardenlet's finalizer patches)
// announce nothing.
func TestBridgeAnnouncesObjectsAgainWhenTheirSecretAppearsOrChanges(t *testing.T) {
	// Each step is two watch events through a loaded API server (make test runs four packages
	// at once beside the node's): 10 s was seen to run out.
	const announceWithin = 30 * time.Second
	h := newHarness(t)
	b := bucket("waits-for-secret", "azure")
	h.create(b)
	untried := bucket("not-tried-yet", "azure")
	h.create(untried)
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	_, _ = h.start(Options{})
	uid := string(b.UID)
	h.eventually(announceWithin, "synced events", func() bool {
		return len(typesOf(h.stream(), uid)) == 1 && len(typesOf(h.stream(), string(untried.UID))) == 1
	})
	h.reportSecretMissing(b)

	// The untried bucket's secret comes first: when the waiting bucket's announcement is out,
	// the same informer has handled the untried one's secret too.
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: untried.Spec.SecretRef.Name, Namespace: "garden"}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: b.Spec.SecretRef.Name, Namespace: "garden"},
		Data: map[string][]byte{"storageAccount": []byte("acc"), "storageKey": []byte("wrong")}}
	h.create(secret)
	h.eventually(announceWithin, "announcement when the secret appears", func() bool { return len(typesOf(h.stream(), uid)) == 2 })
	if got := typesOf(h.stream(), string(untried.UID)); len(got) != 1 {
		t.Errorf("events %v: a bucket that never found its secret missing was announced when it appeared", got)
	}

	h.patch(secret, func() { secret.Finalizers = []string{"extensions.gardener.cloud/backupbucket"} })
	h.patch(secret, func() { secret.Data["storageKey"] = []byte("right") })
	h.eventually(announceWithin, "announcement when the data changes", func() bool { return len(typesOf(h.stream(), uid)) == 3 })
	time.Sleep(500 * time.Millisecond)
	if got := typesOf(h.stream(), uid); len(got) != 3 {
		t.Errorf("events %v: a metadata-only secret update announced the bucket", got)
	}
	for _, r := range h.stream() {
		if strings.Contains(string(r.event.Data()), "right") || strings.Contains(string(r.event.Data()), "wrong") {
			t.Errorf("secret value in event data: %s", r.event.Data())
		}
	}

	// The other order: the secret appears while the function is still trying, and the bucket
	// reports it missing afterwards. The report finds the secret there and announces it.
	late := bucket("reports-late", "azure")
	h.create(late)
	h.eventually(announceWithin, "created event", func() bool { return len(typesOf(h.stream(), string(late.UID))) == 1 })
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: late.Spec.SecretRef.Name, Namespace: "garden"}})
	h.reportSecretMissing(late)
	h.eventually(announceWithin, "announcement when a bucket reports a present secret missing", func() bool {
		return len(typesOf(h.stream(), string(late.UID))) == 2
	})
}

// reportSecretMissing writes the status the bucket function writes when spec.secretRef names
// no secret: lastError with the task that waits for it.
func (h *harness) reportSecretMissing(b *extensionsv1alpha1.BackupBucket) {
	h.t.Helper()
	description := fmt.Sprintf("secret %s/%s referenced by spec.secretRef does not exist", b.Spec.SecretRef.Namespace, b.Spec.SecretRef.Name)
	b.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: "Create", State: "Error", Progress: 50,
		Description: description, LastUpdateTime: metav1.Now()}
	task := gardener.TaskWaitForSecret
	b.Status.LastError = &gardencorev1beta1.LastError{Description: description, TaskID: &task,
		Codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}}
	if !gardener.WaitsForSecret(b) {
		h.t.Fatalf("the status written for %s does not say it waits for its secret", b.Name)
	}
	if err := h.c.Status().Update(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

// cachedSecrets lists the keys of the secrets the bridge's informers hold.
func cachedSecrets(b *Bridge) []string {
	b.secrets.mu.Lock()
	defer b.secrets.mu.Unlock()
	var keys []string
	for _, ns := range b.secrets.namespaces {
		keys = append(keys, ns.informer.GetStore().ListKeys()...)
	}
	return keys
}

// secretRequests records the paths of the requests for secrets sent through a config.
type secretRequests struct {
	mu    sync.Mutex
	paths []string
}

func (r *secretRequests) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/secrets") || strings.Contains(req.URL.Path, "/secrets/") {
				r.mu.Lock()
				r.paths = append(r.paths, req.URL.Path)
				r.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// namespaces lists the namespaces the recorded requests were for, "" for all namespaces.
func (r *secretRequests) namespaces() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var namespaces []string
	for _, p := range r.paths {
		ns := ""
		if rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/"); ok {
			ns, _, _ = strings.Cut(rest, "/")
		}
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	return namespaces
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The bridge lists and watches secrets only in the namespaces handled objects reference, so
// the secrets of other namespaces cost it nothing; a namespace referenced later is watched
// from then on, and no longer once nothing references it.
func TestBridgeWatchesSecretsOnlyWhereReferenced(t *testing.T) {
	h := newHarness(t)
	secret := func(namespace, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Data: map[string][]byte{"storageKey": []byte("key-of-" + name)}}
	}
	for _, ns := range []string{"garden", "unrelated", "late", "early"} {
		h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	h.create(bucket("existing", "azure"))
	h.create(secret("garden", "backup-existing"))
	h.create(secret("unrelated", "backup-existing"))
	// A bucket the bridge does not handle references no watched namespace either.
	foreign := bucket("foreign", "aws")
	foreign.Spec.SecretRef.Namespace = "unrelated"
	h.create(foreign)

	var requests secretRequests
	b, _ := h.startWith(requests.config(h.env.Kube.Config), Options{Scope: gardener.Scope{Types: []string{"azure"}, Classes: []string{"shoot"}}})
	if got := b.secrets.watched(); !slices.Equal(got, []string{"garden"}) {
		t.Errorf("watching secrets in %v, want [garden]", got)
	}
	if got := cachedSecrets(b); !slices.Equal(got, []string{"garden/backup-existing"}) {
		t.Errorf("bridge caches secrets %v, want [garden/backup-existing]", got)
	}

	// Referenced later, before its secret exists: the namespace is watched and the bucket
	// announced again when the secret appears.
	late := bucket("late", "azure")
	late.Spec.SecretRef.Namespace = "late"
	h.create(late)
	h.eventually(10*time.Second, "created event", func() bool { return len(typesOf(h.stream(), string(late.UID))) == 1 })
	h.eventually(10*time.Second, "secrets in late watched", func() bool {
		return slices.Contains(b.secrets.watched(), "late") && b.secrets.hasSynced()
	})
	h.reportSecretMissing(late)
	h.create(secret("late", late.Spec.SecretRef.Name))
	h.eventually(10*time.Second, "announcement when the secret appears", func() bool { return len(typesOf(h.stream(), string(late.UID))) == 2 })
	if got := typesOf(h.stream(), string(late.UID)); got[1] != events.TypeBucketSynced {
		t.Errorf("events %v, want created then synced", got)
	}

	// Referenced later, its secret existing already: should the function have read before
	// the secret was there, its report finds the secret in the new watch's cache and the
	// bucket is announced again.
	early := bucket("early", "azure")
	early.Spec.SecretRef.Namespace = "early"
	h.create(secret("early", early.Spec.SecretRef.Name))
	h.create(early)
	h.eventually(10*time.Second, "secrets in early watched", func() bool {
		return slices.Contains(b.secrets.watched(), "early") && b.secrets.hasSynced()
	})
	h.reportSecretMissing(early)
	h.eventually(10*time.Second, "announcement by the existing secret", func() bool {
		got := typesOf(h.stream(), string(early.UID))
		return len(got) > 0 && got[len(got)-1] == events.TypeBucketSynced
	})

	// Once nothing references them, late and early are no longer watched.
	for _, obj := range []client.Object{late, early} {
		if err := h.c.Delete(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually(10*time.Second, "watches of late and early stopped", func() bool {
		return slices.Equal(b.secrets.watched(), []string{"garden"})
	})
	h.create(secret("unrelated", "created-while-running"))
	time.Sleep(500 * time.Millisecond)

	if got := requests.namespaces(); !slices.Equal(got, []string{"early", "garden", "late"}) {
		t.Errorf("secrets requested in namespaces %q (\"\": all), want only [early garden late]", got)
	}
	for _, key := range cachedSecrets(b) {
		if !strings.HasPrefix(key, "garden/") {
			t.Errorf("bridge caches secret %s", key)
		}
	}
}

// A secret the bridge found by listing, not by watching, announces its users on a data change
// only: gardenlet's finalizer patch on it is no news either (the listed copy used to pass the
// bridge's digest twice and so differ from every later copy).
func TestBridgeIgnoresMetadataUpdatesOfListedSecrets(t *testing.T) {
	h := newHarness(t)
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	b := bucket("listed-secret", "azure")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: b.Spec.SecretRef.Name, Namespace: "garden"},
		Data: map[string][]byte{"storageKey": []byte("first")}}
	h.create(secret)
	h.create(b)
	_, _ = h.start(Options{})
	uid := string(b.UID)
	h.eventually(10*time.Second, "synced event", func() bool { return len(typesOf(h.stream(), uid)) == 1 })

	h.patch(secret, func() { secret.Finalizers = []string{"extensions.gardener.cloud/backupbucket"} })
	h.patch(secret, func() { secret.Data["storageKey"] = []byte("second") })
	// The data change is announced; the finalizer patch, handled before it, must not be.
	h.eventually(10*time.Second, "announcement of the data change", func() bool { return len(typesOf(h.stream(), uid)) >= 2 })
	time.Sleep(500 * time.Millisecond)
	if got := typesOf(h.stream(), uid); len(got) != 2 {
		t.Errorf("events %v, want the synced event and one for the data change: a metadata-only update announced the bucket", got)
	}
}

func TestDigestSecretIsIdempotent(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "garden"}, Data: map[string][]byte{"k": []byte("v")}}
	once, err := digestSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := digestSecret(once.(*corev1.Secret).DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	a, b := once.(*corev1.Secret).Annotations[secretDigestAnnotation], twice.(*corev1.Secret).Annotations[secretDigestAnnotation]
	if a == "" || a != b {
		t.Errorf("digest %q, then %q after a second pass", a, b)
	}
	if once.(*corev1.Secret).Data != nil {
		t.Error("the digested secret still holds data")
	}
}

// A bridge started before housekeeper's CRDs were installed watches each of its kinds once the
// API server serves it, without a restart, and announces its objects.
func TestBridgeWatchesOwnKindsOnceTheirCRDsAreInstalled(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	source, err := newKindSource(h.env.Kube.Config, 0)
	if err != nil {
		t.Fatal(err)
	}
	var own []*kind
	for _, k := range kinds {
		if k.optional {
			own = append(own, k)
		}
	}
	crds := make([]*unstructured.Unstructured, len(own))
	for i, k := range own {
		crds[i] = &unstructured.Unstructured{}
		crds[i].SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := h.c.Get(ctx, client.ObjectKey{Name: k.resource + ".backup.housekeeper.dev"}, crds[i]); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Delete(ctx, crds[i]); err != nil {
			t.Fatal(err)
		}
		h.eventually(30*time.Second, "the API server to stop serving "+k.resource, func() bool {
			served, err := source.served(k)
			return err == nil && !served
		})
	}

	b, _ := h.start(Options{CRDPollInterval: 100 * time.Millisecond})
	for _, k := range own {
		if b.informerOf(k.kind) != nil {
			t.Fatalf("the bridge watches %s while the API server does not serve them", k.resource)
		}
	}
	for i, k := range own {
		crds[i].SetResourceVersion("")
		crds[i].SetUID("")
		unstructured.RemoveNestedField(crds[i].Object, "status")
		h.create(crds[i])
		h.eventually(30*time.Second, "the bridge to watch "+k.resource, func() bool { return b.informerOf(k.kind) != nil })
	}

	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{"http://127.0.0.1:2379"}},
			Schedule: "0 * * * * *", Keep: 3, Destination: "somewhere"}}
	h.create(cfg)
	drill := restoreDrill("weekly")
	h.create(drill)
	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Types: []string{"azure"}}, Destination: "s3-eu", Schedule: "@hourly"}}
	h.create(policy)
	for _, obj := range []client.Object{cfg, drill, policy} {
		h.eventually(10*time.Second, "an event for "+obj.GetName(), func() bool {
			return len(typesOf(h.stream(), string(obj.GetUID()))) > 0
		})
	}
}

func restoreDrill(name string) *backupv1alpha1.RestoreDrill {
	return &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "0 0 3 * * *"}}
}

// RestoreDrills are announced as the other kinds are: by their name alone (they are
// cluster-scoped), with their snapshot, on a spec change, deletion and removal but not on
// a status write, and again on a resync.
func TestBridgePublishesRestoreDrills(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	existing := restoreDrill("nightly")
	h.create(existing)
	b, _ := h.start(Options{RecordDeletions: true})

	d := restoreDrill("weekly")
	d.Finalizers = []string{"backup.housekeeper.dev/test"}
	h.create(d)
	uid := string(d.UID)
	h.eventually(10*time.Second, "created event", func() bool { return len(typesOf(h.stream(), uid)) == 1 })

	d.Status.Entries = 3
	if err := h.c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	h.patch(d, func() { d.Spec.Schedule = "@every 12h" })
	h.eventually(10*time.Second, "updated event", func() bool { return len(typesOf(h.stream(), uid)) == 2 })
	if n := b.Resync("test"); n != 2 {
		t.Errorf("Resync queued %d objects, want the 2 drills", n)
	}
	h.eventually(10*time.Second, "resynced events", func() bool { return len(typesOf(h.stream(), uid)) == 3 })
	if err := h.c.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	h.eventually(10*time.Second, "deleting event", func() bool { return len(typesOf(h.stream(), uid)) == 4 })
	h.patch(d, func() { d.Finalizers = nil })
	h.eventually(10*time.Second, "deleted event", func() bool { return len(typesOf(h.stream(), uid)) == 5 })

	all := h.stream()
	want := []string{events.TypeRestoreDrillCreated, events.TypeRestoreDrillUpdated, events.TypeRestoreDrillSynced,
		events.TypeRestoreDrillDeleting, events.TypeRestoreDrillDeleted}
	if got := typesOf(all, uid); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("drill events:\n got %v\nwant %v", got, want)
	}
	if got := typesOf(all, string(existing.UID)); strings.Join(got, " ") != events.TypeRestoreDrillSynced+" "+events.TypeRestoreDrillSynced {
		t.Errorf("drill existing at start: events %v, want synced at start and on the resync", got)
	}
	for _, r := range all {
		if r.event.Extensions()[events.ExtUID] != uid {
			continue
		}
		ref, err := events.RefOf(r.event)
		if err != nil || ref.Kind != events.KindRestoreDrill || ref.Name != "weekly" || r.subject != strings.TrimSuffix(events.SubjectFilters(r.event.Type())[0], "*")+"weekly" {
			t.Errorf("%s on %s names %+v (%v), want the RestoreDrill weekly", r.event.Type(), r.subject, ref, err)
		}
		var snapshot backupv1alpha1.RestoreDrill
		if err := json.Unmarshal(r.event.Data(), &snapshot); err != nil || snapshot.Kind != "RestoreDrill" ||
			snapshot.APIVersion != "backup.housekeeper.dev/v1alpha1" || snapshot.Name != "weekly" || len(snapshot.ManagedFields) != 0 {
			t.Errorf("%s data = %s (%v)", r.event.Type(), r.event.Data(), err)
		}
	}
}
