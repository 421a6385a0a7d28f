package entry_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// Forged events. Anyone who can publish on housekeeper's subjects can put any copy of an
// object into an event, and send it on the event's own subject or on a function's redrive
// subject. Events are triggers, never the source of truth: whatever a forged event claims, a
// function must decide from the live objects, so a forged event about a live, healthy object
// changes nothing. Each test below builds such objects, reads their state once the pipeline is
// at rest, publishes one forged event per object (every object gets exactly one, so that what
// one forgery does never shows up as another's), waits until the functions are at rest again,
// and expects every object, secret, blob and schedule exactly as it was:
//
//   - the object: same uid and resourceVersion (any write bumps it), no deletionTimestamp, same
//     finalizers, annotations and spec, same lastOperation (type, state, description), no
//     lastError;
//   - the secrets: same uid, resourceVersion, finalizers and data;
//   - the blobs: all still there; the container: the same (not deleted and re-created);
//   - no purge scheduled or announced for an entry that is not being deleted;
//   - the consumer at rest: nothing pending or unacknowledged, no retry scheduled, and its
//     delivered sequence not growing over 3 s (no hot loop);
//   - no dead letters: a well-formed event, forged or stale, is handled by converging to the
//     live state and acknowledged, not given up on.
//
// A guard fails a subtest whose forged event never reached the function: the consumer filters
// on its subject and has acknowledged past its stream sequence.

// How a forged copy claims to be the live object.
const (
	madeUpUID = "made-up-uid" // a uid no object has, with the live resourceVersion
	staleRV   = "rv-1"        // the live uid with resourceVersion "1"
	currentRV = "current-rv"  // the live uid and resourceVersion, read right before forging
)

// What a forged copy says.
const (
	// claimDeletion: deletionTimestamp set, our finalizer on (as a real deleting event).
	claimDeletion = "deletion"
	// claimOtherSpec: no finalizer at all, as a new object (so the function may start from
	// the copy), and another spec.secretRef (entries: and spec.bucketName).
	claimOtherSpec = "other-spec"
	// claimMigrate: no finalizer at all and gardener.cloud/operation: migrate.
	claimMigrate = "migrate"
)

// foreignFinalizer is another controller's finalizer on every live object of the entry and
// bucket tests: a write built from a forged copy without it would take it away.
const foreignFinalizer = "example.com/another-controller"

// forgery is one forged object event.
type forgery struct {
	op       events.Operation
	claim    string
	identity string
	// redrive: published on the function's redrive subject instead of the event's own.
	redrive bool
}

func (fg forgery) String() string {
	via := "object-subject"
	if fg.redrive {
		via = "redrive"
	}
	return fmt.Sprintf("%s:%s:%s:%s", fg.op, fg.claim, fg.identity, via)
}

// forgeries are the forged events of every operation the bucket and entry functions take:
// deleting with a deletion claim; created, updated and synced with another spec and with the
// migrate annotation; each with the three identities, on both subjects.
func forgeries() []forgery {
	var out []forgery
	for _, op := range []events.Operation{events.OpDeleting, events.OpCreated, events.OpUpdated, events.OpSynced} {
		claims := []string{claimOtherSpec, claimMigrate}
		if op == events.OpDeleting {
			claims = []string{claimDeletion}
		}
		for _, claim := range claims {
			for _, identity := range []string{madeUpUID, staleRV, currentRV} {
				for _, redrive := range []bool{false, true} {
					out = append(out, forgery{op: op, claim: claim, identity: identity, redrive: redrive})
				}
			}
		}
	}
	return out
}

// apply turns obj, the live object read right before, into the forged copy. otherSpec changes
// the spec for claimOtherSpec.
func (fg forgery) apply(obj extensionsv1alpha1.Object, finalizer string, otherSpec func()) {
	switch fg.identity {
	case madeUpUID:
		obj.SetUID(uuid.NewUUID())
	case staleRV:
		obj.SetResourceVersion("1")
	}
	switch fg.claim {
	case claimDeletion:
		now := metav1.Now()
		obj.SetDeletionTimestamp(&now)
		controllerutil.AddFinalizer(obj, finalizer)
	case claimOtherSpec:
		obj.SetFinalizers(nil)
		otherSpec()
	case claimMigrate:
		obj.SetFinalizers(nil)
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[gardener.AnnotationOperation] = gardener.OperationMigrate
		obj.SetAnnotations(annotations)
	}
}

// forgeObjectEvent encodes the op event about obj under a fresh id (a trigger no real event
// has), so that JetStream stores it even if an event about the same state exists.
func forgeObjectEvent(t testing.TB, kind events.Kind, op events.Operation, obj client.Object) *nats.Msg {
	t.Helper()
	e, err := pipeline.ObjectEvent(kind, op, obj, events.WithTrigger("forged-"+string(uuid.NewUUID())))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := events.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// publishForged publishes msg on its subject, or on function's redrive subject (the same
// headers) if redriveTo is set.
func (f *fixture) publishForged(msg *nats.Msg, redriveTo string) pipeline.Stored {
	f.T.Helper()
	if redriveTo != "" {
		msg.Subject = events.RedriveSubject(redriveTo)
	}
	return f.PublishNew(msg)
}

func redriveTarget(redrive bool, function string) string {
	if redrive {
		return function
	}
	return ""
}

// mustSettle waits until functions are at rest before the test reads the state it compares with.
func (f *fixture) mustSettle(functions ...string) {
	f.T.Helper()
	for _, fn := range functions {
		if _, err := f.AtRest(fn); err != nil {
			f.T.Fatal(err)
		}
	}
}

// settleAll waits until functions are at rest after the forged events and returns the
// consumers' infos; a consumer that does not come to rest fails the test (and has no info).
func (f *fixture) settleAll(functions ...string) map[string]*jetstream.ConsumerInfo {
	f.T.Helper()
	infos := map[string]*jetstream.ConsumerInfo{}
	for _, fn := range functions {
		info, err := f.AtRest(fn)
		if err != nil {
			f.T.Errorf("after the forged events: %v", err)
			continue
		}
		infos[fn] = info
	}
	return infos
}

// deadLettered lists the dead letters of the forged event.
func deadLettered(dls []runner.DeadLetter, m pipeline.Stored) []string {
	var out []string
	for _, d := range dls {
		if d.EventID == m.ID {
			out = append(out, fmt.Sprintf("dead-lettered by %s: %s", d.Function, d.Reason))
		}
	}
	return out
}

// unexpectedDeadLetters lists dead letters of none of the forged events.
func unexpectedDeadLetters(dls []runner.DeadLetter, forged []pipeline.Stored) []string {
	var out []string
	for _, d := range dls {
		if !slices.ContainsFunc(forged, func(m pipeline.Stored) bool { return m.ID == d.EventID }) {
			out = append(out, fmt.Sprintf("%s %s (%s): %s", d.Function, d.EventType, d.Subject, d.Reason))
		}
	}
	return out
}

// fact is one observed piece of state, rendered so that any change that matters changes it.
type fact struct{ what, value string }

// diff lists the facts that changed.
func diff(before, after []fact) []string {
	var out []string
	for i, b := range before {
		if i >= len(after) || after[i].what != b.what {
			out = append(out, b.what+": not observed again")
			continue
		}
		if a := after[i]; a.value != b.value {
			out = append(out, fmt.Sprintf("%s:\n      before: %s\n      after:  %s", b.what, b.value, a.value))
		}
	}
	return out
}

func unreadable(err error) string {
	if apierrors.IsNotFound(err) {
		return "absent (not found)"
	}
	return "unreadable: " + err.Error()
}

// observeExtension renders a BackupBucket's or BackupEntry's state; spec adds its spec.
func (f *fixture) observeExtension(obj extensionsv1alpha1.Object, name string, spec func() string) string {
	if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
		return unreadable(err)
	}
	deletion := "none"
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		deletion = ts.UTC().Format(time.RFC3339)
	}
	s := fmt.Sprintf("uid=%s resourceVersion=%s deletionTimestamp=%s finalizers=%v annotations=%v %s",
		obj.GetUID(), obj.GetResourceVersion(), deletion, obj.GetFinalizers(), obj.GetAnnotations(), spec())
	if op := obj.GetExtensionStatus().GetLastOperation(); op != nil {
		s += fmt.Sprintf(" lastOperation=%s/%s %q", op.Type, op.State, op.Description)
	} else {
		s += " lastOperation=none"
	}
	if le := obj.GetExtensionStatus().GetLastError(); le != nil {
		s += fmt.Sprintf(" lastError=%q", le.Description)
	} else {
		s += " lastError=none"
	}
	return s
}

func (f *fixture) observeEntry(name string) string {
	e := &extensionsv1alpha1.BackupEntry{}
	return f.observeExtension(e, name, func() string {
		return fmt.Sprintf("spec.secretRef=%s/%s spec.bucketName=%s", e.Spec.SecretRef.Namespace, e.Spec.SecretRef.Name, e.Spec.BucketName)
	})
}

func (f *fixture) observeBucket(name string) string {
	b := &extensionsv1alpha1.BackupBucket{}
	return f.observeExtension(b, name, func() string {
		generated := "none"
		if r := b.Status.GeneratedSecretRef; r != nil {
			generated = r.Namespace + "/" + r.Name
		}
		return fmt.Sprintf("spec.secretRef=%s/%s status.generatedSecretRef=%s", b.Spec.SecretRef.Namespace, b.Spec.SecretRef.Name, generated)
	})
}

// observeSecret renders a secret: identity, version, finalizers and a digest of its data.
func (f *fixture) observeSecret(namespace, name string) string {
	s := &corev1.Secret{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return unreadable(err)
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, s.Data[k])
	}
	return fmt.Sprintf("uid=%s resourceVersion=%s finalizers=%v data=%x (bucketName %q)", s.UID, s.ResourceVersion, s.Finalizers, h.Sum(nil)[:8], s.Data[entry.DataKeyBucketName])
}

// observeContainer renders an Azure container: whether it exists, and its ETag (a container
// deleted and created again has another).
func (f *fixture) observeContainer(name string) string {
	props, err := f.blobs.ServiceClient().NewContainerClient(name).GetProperties(context.Background(), nil)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("exists, ETag %s", *props.ETag)
}

// observeBlobs renders the blobs under prefix in container: how many, and a digest of their
// names.
func (f *fixture) observeBlobs(container, prefix string) string {
	var keys []string
	pager := f.blobs.NewListBlobsFlatPager(container, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			return "unlistable: " + err.Error()
		}
		for _, b := range page.Segment.BlobItems {
			keys = append(keys, *b.Name)
		}
	}
	slices.Sort(keys)
	return fmt.Sprintf("%d blobs, names %x", len(keys), sha256.Sum256([]byte(strings.Join(keys, "\x00"))))
}

// observeSubject renders the last message on a subject of the stream of record.
func (f *fixture) observeSubject(subject string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := f.JS.Stream(ctx, events.StreamOf(subject))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return "no message"
	case err != nil:
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("message %d (%s)", msg.Sequence, msg.Header.Get("ce-type"))
}

func (f *fixture) mustSecret(namespace, name string) *corev1.Secret {
	f.T.Helper()
	s := &corev1.Secret{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		f.T.Fatal(err)
	}
	return s
}

func (f *fixture) uploadTo(container string, keys ...string) {
	f.T.Helper()
	for _, k := range keys {
		if _, err := f.blobs.UploadBuffer(context.Background(), container, k, []byte("snapshot"), nil); err != nil {
			f.T.Fatalf("%s/%s: %v", container, k, err)
		}
	}
}

// decoyData is what a forged spec.secretRef points to: the Azurite account with a key that
// is not its key.
func decoyData(real map[string][]byte) map[string][]byte {
	d := maps.Clone(real)
	d[azure.KeyStorageKey] = []byte(base64.StdEncoding.EncodeToString([]byte("this is not the storage key of the account, forged")))
	return d
}

// groupFacts are what a forged event about one object must not change for all of them: the
// fixture's bucket, its container and its generated secret.
func (f *fixture) groupFacts() []fact {
	return []fact{
		{"BackupBucket " + bucketName, f.observeBucket(bucketName)},
		{"container " + bucketName, f.observeContainer(bucketName)},
		{"generated secret of " + bucketName, f.observeSecret("garden", bucket.GeneratedSecretPrefix+bucketName)},
	}
}

// checkGroup fails the test if the forged events changed the fixture's bucket or left dead
// letters no forged event explains.
func checkGroup(t *testing.T, before, after []fact, dls []runner.DeadLetter, forged []pipeline.Stored) {
	t.Helper()
	if d := diff(before, after); len(d) > 0 {
		t.Errorf("the forged events changed shared state:\n  %s", strings.Join(d, "\n  "))
	}
	if u := unexpectedDeadLetters(dls, forged); len(u) > 0 {
		t.Errorf("dead letters of events that were not forged:\n  %s", strings.Join(u, "\n  "))
	}
}

// check is the verdict of one subtest: the guard, then every change the forged event caused.
func check(t *testing.T, info *jetstream.ConsumerInfo, m pipeline.Stored, before, after []fact, dls []runner.DeadLetter) {
	t.Helper()
	if err := pipeline.Acked(info, m); err != nil {
		t.Fatal(err)
	}
	changes := append(diff(before, after), deadLettered(dls, m)...)
	if len(changes) > 0 {
		t.Errorf("the forged event (stream sequence %d on %s) changed live state:\n  %s", m.Seq, m.Subject, strings.Join(changes, "\n  "))
	}
}

// TestForgedEntryEvents: forged BackupEntry events about live, healthy entries change
// nothing. Each entry has its own namespace with its etcd-backup secret, its own
// spec.secretRef secret, backups under its prefix, a retention of 1h (a purge it scheduled
// would wait on the server) and another controller's finalizer besides ours; a forged other
// spec.secretRef names a decoy secret.
func TestForgedEntryEvents(t *testing.T) {
	t.Parallel() // its own stack; run beside the other forged-event tests
	began := time.Now()
	f := start(t, false)
	ctx := context.Background()
	generated := f.mustSecret("garden", bucket.GeneratedSecretPrefix+bucketName)
	cases := forgeries()
	names := make([]string, len(cases))
	for i := range cases {
		ns := fmt.Sprintf("shoot--fe%02d--app", i)
		names[i] = ns + "--a1"
		f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("entry-creds-%02d", i), Namespace: "garden"}, Data: generated.Data})
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("entry-decoy-%02d", i), Namespace: "garden"}, Data: decoyData(generated.Data)})
		e := newEntry(names[i], map[string]string{entry.AnnotationRetention: "1h"})
		e.Spec.SecretRef = corev1.SecretReference{Name: fmt.Sprintf("entry-creds-%02d", i), Namespace: "garden"}
		e.Finalizers = []string{foreignFinalizer}
		f.create(e)
	}
	for _, name := range names {
		f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
		f.Eventually(30*time.Second, "etcd-backup of "+name, func() (bool, string) {
			err := f.Client.Get(ctx, client.ObjectKey{Namespace: gardener.EntryNamespace(name), Name: entry.SecretName}, &corev1.Secret{})
			return err == nil, fmt.Sprint(err)
		})
		f.upload(snapshots(name+"/", 3)...)
	}
	f.mustSettle(entry.Definition.Name, bucket.Definition.Name, entry.PurgeDefinition.Name)

	observe := func(i int) []fact {
		name := names[i]
		return []fact{
			{"BackupEntry", f.observeEntry(name)},
			{"etcd-backup secret", f.observeSecret(gardener.EntryNamespace(name), entry.SecretName)},
			{"spec.secretRef secret", f.observeSecret("garden", fmt.Sprintf("entry-creds-%02d", i))},
			{"decoy secret", f.observeSecret("garden", fmt.Sprintf("entry-decoy-%02d", i))},
			{"blobs under the entry's prefix", f.observeBlobs(bucketName, gardener.EntryPrefix(name))},
			{"purge schedule", f.observeSubject(events.PurgeScheduleSubject(name))},
			{"purge.scheduled announcement", f.observeSubject(mustSubject(t, events.TypePurgeScheduled, name))},
		}
	}
	before := make([][]fact, len(cases))
	for i := range cases {
		before[i] = observe(i)
		if !strings.Contains(before[i][0].value, "deletionTimestamp=none") || !strings.Contains(before[i][0].value, "/Succeeded") ||
			!strings.Contains(before[i][0].value, "lastError=none") || before[i][5].value != "no message" {
			t.Fatalf("%s is not a healthy entry to start from: %v", names[i], before[i])
		}
	}
	groupBefore := f.groupFacts()

	forged := make([]pipeline.Stored, len(cases))
	for i, fg := range cases {
		live := f.entry(names[i])
		fg.apply(live, entry.Finalizer, func() {
			live.Spec.SecretRef = corev1.SecretReference{Name: fmt.Sprintf("entry-decoy-%02d", i), Namespace: "garden"}
			live.Spec.BucketName = "forged-bucket"
		})
		forged[i] = f.publishForged(forgeObjectEvent(t, events.KindBackupEntry, fg.op, live), redriveTarget(fg.redrive, entry.Definition.Name))
	}
	infos := f.settleAll(entry.Definition.Name, bucket.Definition.Name, entry.PurgeDefinition.Name)
	dls := f.DeadLetters("")
	after := make([][]fact, len(cases))
	for i := range cases {
		after[i] = observe(i)
	}
	checkGroup(t, groupBefore, f.groupFacts(), dls, forged)

	for i, fg := range cases {
		t.Run(fg.String(), func(t *testing.T) {
			check(t, infos[entry.Definition.Name], forged[i], before[i], after[i], dls)
		})
	}
	t.Logf("%d forged entry events; test took %s", len(cases), time.Since(began).Round(time.Second))
}

// TestForgedBucketEvents: forged BackupBucket events about live, healthy buckets change
// nothing. Each bucket has its own credentials secret, its container with blobs, its
// generated secret, and another controller's finalizer besides ours; a forged deletion is
// tried on buckets no entry uses (where the function would delete the container) and on
// buckets an entry uses (where it would wait, in Error); a forged other spec.secretRef names
// a decoy secret whose key Azurite refuses.
func TestForgedBucketEvents(t *testing.T) {
	t.Parallel() // its own stack; run beside the other forged-event tests
	began := time.Now()
	f := start(t, false)
	ctx := context.Background()
	seedCredentials := f.mustSecret("garden", "seed-credentials")
	type bucketCase struct {
		forgery
		used bool // an entry uses the bucket
	}
	var cases []bucketCase
	for _, fg := range forgeries() {
		cases = append(cases, bucketCase{forgery: fg})
		if fg.claim == claimDeletion {
			cases = append(cases, bucketCase{forgery: fg, used: true})
		}
	}
	names := make([]string, len(cases))
	users := make([]string, len(cases))
	for i := range cases {
		names[i] = fmt.Sprintf("forged-b%02d", i)
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bucket-creds-%02d", i), Namespace: "garden"}, Data: seedCredentials.Data})
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bucket-decoy-%02d", i), Namespace: "garden"}, Data: decoyData(seedCredentials.Data)})
		f.create(&extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Finalizers: []string{foreignFinalizer}},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, Region: "westeurope",
				SecretRef: corev1.SecretReference{Name: fmt.Sprintf("bucket-creds-%02d", i), Namespace: "garden"},
			},
		})
	}
	for i, c := range cases {
		f.waitState(&extensionsv1alpha1.BackupBucket{}, names[i], gardencorev1beta1.LastOperationStateSucceeded)
		f.uploadTo(names[i], snapshots("shoot--dev--app--1/", 3)...)
		if c.used {
			users[i] = fmt.Sprintf("shoot--fbu%02d--app--a1", i)
			e := newEntry(users[i], nil)
			e.Spec.BucketName = names[i]
			e.Spec.SecretRef = corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + names[i], Namespace: "garden"}
			f.create(e)
		}
	}
	for _, user := range users {
		if user != "" {
			f.waitState(&extensionsv1alpha1.BackupEntry{}, user, gardencorev1beta1.LastOperationStateSucceeded)
		}
	}
	f.mustSettle(bucket.Definition.Name, entry.Definition.Name, entry.PurgeDefinition.Name)

	observe := func(i int) []fact {
		name := names[i]
		facts := []fact{
			{"BackupBucket", f.observeBucket(name)},
			{"generated secret", f.observeSecret("garden", bucket.GeneratedSecretPrefix+name)},
			{"spec.secretRef secret", f.observeSecret("garden", fmt.Sprintf("bucket-creds-%02d", i))},
			{"decoy secret", f.observeSecret("garden", fmt.Sprintf("bucket-decoy-%02d", i))},
			{"container", f.observeContainer(name)},
			{"blobs", f.observeBlobs(name, "")},
		}
		if users[i] != "" {
			facts = append(facts, fact{"BackupEntry using the bucket", f.observeEntry(users[i])})
		}
		return facts
	}
	before := make([][]fact, len(cases))
	for i := range cases {
		before[i] = observe(i)
		if !strings.Contains(before[i][0].value, "deletionTimestamp=none") || !strings.Contains(before[i][0].value, "/Succeeded") ||
			!strings.Contains(before[i][0].value, "lastError=none") || !strings.HasPrefix(before[i][5].value, "3 blobs") {
			t.Fatalf("%s is not a healthy bucket to start from: %v", names[i], before[i])
		}
	}
	groupBefore := f.groupFacts()

	forged := make([]pipeline.Stored, len(cases))
	for i, c := range cases {
		live := &extensionsv1alpha1.BackupBucket{}
		if err := f.Client.Get(ctx, client.ObjectKey{Name: names[i]}, live); err != nil {
			t.Fatal(err)
		}
		c.apply(live, bucket.Finalizer, func() {
			live.Spec.SecretRef = corev1.SecretReference{Name: fmt.Sprintf("bucket-decoy-%02d", i), Namespace: "garden"}
		})
		forged[i] = f.publishForged(forgeObjectEvent(t, events.KindBackupBucket, c.op, live), redriveTarget(c.redrive, bucket.Definition.Name))
	}
	infos := f.settleAll(bucket.Definition.Name, entry.Definition.Name, entry.PurgeDefinition.Name)
	dls := f.DeadLetters("")
	after := make([][]fact, len(cases))
	for i := range cases {
		after[i] = observe(i)
	}
	checkGroup(t, groupBefore, f.groupFacts(), dls, forged)

	for i, c := range cases {
		name := c.String()
		if c.claim == claimDeletion {
			name += map[bool]string{false: ":unused", true: ":used-by-an-entry"}[c.used]
		}
		t.Run(name, func(t *testing.T) {
			check(t, infos[bucket.Definition.Name], forged[i], before[i], after[i], dls)
		})
	}
	t.Logf("%d forged bucket events; test took %s", len(cases), time.Since(began).Round(time.Second))
}

// TestForgedPurgeDue: a forged purge-due event that claims the purge is due, with the
// entry's real uid, purges nothing and releases nothing — neither for a live, healthy entry
// nor for one that is deleting but not due yet (retention 1h): for the latter, its real
// schedule stays as it is.
func TestForgedPurgeDue(t *testing.T) {
	t.Parallel() // its own stack; run beside the other forged-event tests
	began := time.Now()
	f := start(t, false)
	type dueCase struct {
		deleting, redrive bool
	}
	cases := []dueCase{{false, false}, {false, true}, {true, false}, {true, true}}
	names := make([]string, len(cases))
	for i := range cases {
		ns := fmt.Sprintf("shoot--fp%02d--app", i)
		names[i] = ns + "--a1"
		f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		f.create(newEntry(names[i], map[string]string{entry.AnnotationRetention: "1h"}))
	}
	for i, c := range cases {
		f.waitState(&extensionsv1alpha1.BackupEntry{}, names[i], gardencorev1beta1.LastOperationStateSucceeded)
		f.upload(snapshots(names[i]+"/", 3)...)
		if c.deleting {
			f.deleteUntilPending(f.entry(names[i]))
		}
	}
	f.mustSettle(entry.Definition.Name, bucket.Definition.Name, entry.PurgeDefinition.Name)

	observe := func(i int) []fact {
		name := names[i]
		return []fact{
			{"BackupEntry", f.observeEntry(name)},
			{"etcd-backup secret", f.observeSecret(gardener.EntryNamespace(name), entry.SecretName)},
			{"blobs under the entry's prefix", f.observeBlobs(bucketName, gardener.EntryPrefix(name))},
			{"purge schedule", f.observeSubject(events.PurgeScheduleSubject(name))},
			{"purge.completed announcement", f.observeSubject(mustSubject(t, events.TypePurgeCompleted, name))},
			{"purge.failed announcement", f.observeSubject(mustSubject(t, events.TypePurgeFailed, name))},
		}
	}
	before := make([][]fact, len(cases))
	for i, c := range cases {
		before[i] = observe(i)
		want := "/Succeeded"
		if c.deleting {
			want = "Delete/Pending"
		}
		if !strings.Contains(before[i][0].value, want) || (before[i][3].value == "no message") != !c.deleting {
			t.Fatalf("%s is not the entry to start from: %v", names[i], before[i])
		}
	}
	groupBefore := f.groupFacts()

	forged := make([]pipeline.Stored, len(cases))
	for i, c := range cases {
		live := f.entry(names[i])
		data := events.PurgeData{Entry: live.Name, UID: string(live.UID), BucketName: live.Spec.BucketName,
			Prefix: gardener.EntryPrefix(live.Name), DueAt: time.Now().Add(-time.Minute).UTC()}
		e, err := events.NewPurgeEvent(pipeline.Cluster, events.OpPurgeDue, kube.Ref(events.KindBackupEntry, live), data, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		e.SetID(strings.ReplaceAll(string(uuid.NewUUID()), "-", ""))
		msg, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		forged[i] = f.publishForged(msg, redriveTarget(c.redrive, entry.PurgeDefinition.Name))
	}
	infos := f.settleAll(entry.PurgeDefinition.Name, entry.Definition.Name, bucket.Definition.Name)
	dls := f.DeadLetters("")
	after := make([][]fact, len(cases))
	for i := range cases {
		after[i] = observe(i)
	}
	checkGroup(t, groupBefore, f.groupFacts(), dls, forged)

	for i, c := range cases {
		name := map[bool]string{false: "healthy-entry", true: "deleting-not-due"}[c.deleting] +
			map[bool]string{false: ":purge-due-subject", true: ":redrive"}[c.redrive]
		t.Run(name, func(t *testing.T) {
			check(t, infos[entry.PurgeDefinition.Name], forged[i], before[i], after[i], dls)
		})
	}
	t.Logf("%d forged purge-due events; test took %s", len(cases), time.Since(began).Round(time.Second))
}

func mustSubject(t testing.TB, eventType, name string) string {
	t.Helper()
	s, err := events.Subject(eventType, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
