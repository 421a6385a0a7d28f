package entry_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

const bucketName = "seed-backups"

type fixture struct {
	*pipeline.Pipeline
	blobs *azblob.Client
}

// start runs bridge → NATS → bucket, entry (and unless withoutPurge, purge) functions on
// Azurite, with an Azure bucket that Succeeded.
func start(t *testing.T, withoutPurge bool) *fixture {
	return startOn(t, pipeline.Start(t), withoutPurge)
}

// startOn is start on the pipeline p; each function publishes as its own identity.
func startOn(t *testing.T, p *pipeline.Pipeline, withoutPurge bool) *fixture {
	providers := objectstore.NewRegistry(azure.New())
	p.RunFunction(bucket.Definition, providers)
	p.RunFunction(entry.Definition, providers)
	if !withoutPurge {
		p.RunFunction(entry.PurgeDefinition, providers)
	}
	cred, err := azblob.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := azblob.NewClientWithSharedKeyCredential(p.Env.Azurite.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{Pipeline: p, blobs: blobs}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "seed-credentials", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(p.Env.Azurite.Endpoint),
	}})
	f.create(&extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, Region: "westeurope",
			SecretRef: corev1.SecretReference{Name: "seed-credentials", Namespace: "garden"},
		},
	})
	f.waitState(&extensionsv1alpha1.BackupBucket{}, bucketName, gardencorev1beta1.LastOperationStateSucceeded)
	return f
}

func (f *fixture) create(obj client.Object) {
	f.T.Helper()
	if err := f.Client.Create(context.Background(), obj); err != nil {
		f.T.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func newEntry(name string, annotations map[string]string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, BucketName: bucketName, Region: "westeurope",
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
		},
	}
}

// describe reads an extension object's state as one line.
func (f *fixture) describe(obj extensionsv1alpha1.Object, name string) (bool, string) {
	if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
		return false, err.Error()
	}
	s := "no lastOperation"
	if op := obj.GetExtensionStatus().GetLastOperation(); op != nil {
		s = fmt.Sprintf("%s/%s %d%% %q", op.Type, op.State, op.Progress, op.Description)
	}
	if le := obj.GetExtensionStatus().GetLastError(); le != nil {
		s += fmt.Sprintf(" lastError=%q codes=%v", le.Description, le.Codes)
	}
	return true, s
}

func (f *fixture) waitState(obj extensionsv1alpha1.Object, name string, state gardencorev1beta1.LastOperationState) {
	f.T.Helper()
	f.Eventually(30*time.Second, fmt.Sprintf("%s %s", name, state), func() (bool, string) {
		ok, s := f.describe(obj, name)
		op := obj.GetExtensionStatus().GetLastOperation()
		return ok && op != nil && op.State == state, s
	})
}

func (f *fixture) waitGone(name string) time.Time {
	f.T.Helper()
	f.Eventually(60*time.Second, name+" gone", func() (bool, string) {
		ok, s := f.describe(&extensionsv1alpha1.BackupEntry{}, name)
		return !ok && strings.Contains(s, "not found"), s
	})
	return time.Now()
}

func (f *fixture) upload(keys ...string) {
	f.T.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := f.blobs.UploadBuffer(context.Background(), bucketName, k, []byte("snapshot"), nil); err != nil {
				errs <- fmt.Errorf("%s: %w", k, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.T.Fatal(err)
	}
}

func (f *fixture) list(prefix string) []string {
	f.T.Helper()
	return listIn(f.T, f.blobs, bucketName, prefix)
}

func (f *fixture) delete(obj client.Object) {
	f.T.Helper()
	if err := f.Client.Delete(context.Background(), obj); err != nil {
		f.T.Fatal(err)
	}
}

func snapshots(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%setcd-main/v2/Full-%08d-%08d-%d.gz", prefix, i, i+1, 1700000000+i)
	}
	return keys
}

// An entry gets its etcd-backup secret, whose keys let etcd-backup-restore write under the
// entry's prefix; an entry whose namespace does not exist yet says so and gets its secret when
// the namespace appears.
func TestEntrySecretLetsEtcdBackupRestoreWrite(t *testing.T) {
	f := start(t, true)
	ctx := context.Background()
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--app"}})
	f.create(newEntry("shoot--dev--app--6f1c", nil))
	f.waitState(&extensionsv1alpha1.BackupEntry{}, "shoot--dev--app--6f1c", gardencorev1beta1.LastOperationStateSucceeded)

	secret := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--app", Name: "etcd-backup"}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Annotations[entry.AnnotationCreatedBy] != "shoot--dev--app--6f1c" || string(secret.Data["bucketName"]) != bucketName {
		t.Errorf("etcd-backup secret: annotations %v, bucketName %q", secret.Annotations, secret.Data["bucketName"])
	}
	for _, k := range []string{"storageAccount", "storageKey"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("etcd-backup secret lacks %s", k)
		}
	}
	cred, err := azblob.NewSharedKeyCredential(string(secret.Data["storageAccount"]), string(secret.Data["storageKey"]))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := azblob.NewClientWithSharedKeyCredential(string(secret.Data["endpoint"]), cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.UploadBuffer(ctx, string(secret.Data["bucketName"]), "shoot--dev--app--6f1c/etcd-main/v2/Full-00000000-00000001-1", []byte("snapshot"), nil); err != nil {
		t.Errorf("writing with the etcd-backup secret: %v", err)
	}

	// A malformed retention annotation (one the admission policy was not there to refuse) is
	// reported at create, in the description, without a lastError: it matters only to the purge.
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--odd"}})
	f.create(newEntry("shoot--dev--odd--2c3d", map[string]string{entry.AnnotationRetention: "banana"}))
	f.Eventually(30*time.Second, "the bad retention in the description, no lastError", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(e, "shoot--dev--odd--2c3d")
		op := e.Status.LastOperation
		return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded && e.Status.LastError == nil &&
			strings.Contains(op.Description, `annotation housekeeper.dev/retention="banana" is not a non-negative duration`), s
	})

	// The namespace of this one appears later: meanwhile the entry is Succeeded, says why the
	// secret waits, and has no lastError (gardenlet would fail the shoot's operation on it).
	f.create(newEntry("source-shoot--dev--late--9a8b", nil))
	f.Eventually(30*time.Second, "a description about the namespace and no lastError", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(e, "source-shoot--dev--late--9a8b")
		op := e.Status.LastOperation
		return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded && e.Status.LastError == nil &&
			strings.Contains(op.Description, "namespace shoot--dev--late does not exist"), s
	})
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--late"}})
	f.Eventually(30*time.Second, "source-etcd-backup written once the namespace is there", func() (bool, string) {
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--late", Name: "source-etcd-backup"}, &corev1.Secret{})
		return err == nil, fmt.Sprint(err)
	})
	f.Eventually(30*time.Second, "the waiting description replaced", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, s := f.describe(e, "source-shoot--dev--late--9a8b")
		return e.Status.LastOperation != nil && !strings.Contains(e.Status.LastOperation.Description, "namespace"), s
	})
}

// With a 30 s retention, deleting an entry leaves its blobs until the due time, then removes
// exactly <entry>/: not <entry>0/, not a neighbour's, not the bucket root's.
func TestRetentionThenPurgeOfExactlyThePrefix(t *testing.T) {
	t.Parallel() // its own stack, waiting most of the time: beside the other waiting tests
	f := start(t, false)
	const name = "shoot--dev--app--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--app"}})
	e := newEntry(name, map[string]string{entry.AnnotationRetention: "30s"})
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	inside := snapshots(name+"/", 40)
	outside := slices.Concat(snapshots(name+"0/", 10), snapshots("shoot--dev--app--10/", 10), snapshots("shoot--dev--other--1/", 10), []string{"root-object", name + "-not-a-prefix"})
	f.upload(slices.Concat(inside, outside)...)

	f.delete(e)
	live := &extensionsv1alpha1.BackupEntry{}
	f.waitState(live, name, gardencorev1beta1.LastOperationStatePending)
	due := live.DeletionTimestamp.Add(30 * time.Second)
	if op := live.Status.LastOperation; op.Type != gardencorev1beta1.LastOperationTypeDelete || !strings.Contains(op.Description, due.UTC().Format(time.RFC3339)) {
		t.Errorf("pending status %q does not name the due time %s", op.Description, due.UTC().Format(time.RFC3339))
	}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: "shoot--dev--app", Name: "etcd-backup"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("etcd-backup secret after deletion: %v, want not found", err)
	}
	// Untouched until due.
	for time.Until(due) > 2*time.Second {
		if n := len(f.list(name + "/")); n != len(inside) {
			t.Fatalf("%d of %d blobs left %s before the due time", n, len(inside), time.Until(due))
		}
		time.Sleep(time.Second)
	}
	gone := f.waitGone(name)
	if gone.Before(due) {
		t.Errorf("entry released at %s, before its due time %s", gone, due)
	}
	if left := f.list(name + "/"); len(left) != 0 {
		t.Errorf("%d blobs left under %s/", len(left), name)
	}
	all := f.list("")
	for _, k := range outside {
		if !slices.Contains(all, k) {
			t.Errorf("%s, outside the prefix, was deleted", k)
		}
	}
}

// An entry deleted and re-created with the same name and a new uid: the old entry's purge
// does not touch the new entry's data, even when the new entry is itself deleting, still holds
// the finalizer and is due — only the uid tells the two apart. The purges are handled here,
// one at a time, so the test sees each one end; the one with the new uid is the control that
// shows the same setup does purge.
func TestOldScheduleDoesNotTouchARecreatedEntry(t *testing.T) {
	f := start(t, true)
	ctx := context.Background()
	const name = "shoot--dev--again--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--again"}})
	// A retention keeps each deleted entry Pending, scheduled: one due at once, the entry
	// function would purge itself.
	const retention = 2 * time.Second
	old := newEntry(name, map[string]string{entry.AnnotationRetention: retention.String()})
	f.create(old)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	oldDue := f.deleteUntilPending(old)
	// Someone releases the old object by hand; a new shoot gets an entry of the same name,
	// which is deleted at once as well.
	live := &extensionsv1alpha1.BackupEntry{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = nil
	if err := f.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	f.waitGone(name)
	recreated := newEntry(name, map[string]string{entry.AnnotationRetention: retention.String()})
	f.create(recreated)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	data := snapshots(name+"/", 20)
	f.upload(data...)
	newDue := f.deleteUntilPending(recreated).Add(retention)
	oldDue = oldDue.Add(retention)
	time.Sleep(time.Until(newDue))

	purger, err := entry.PurgeDefinition.Build(ctx, runner.Deps{Client: f.Client, JetStream: f.JS, Stores: objectstore.NewRegistry(azure.New()),
		Cluster: pipeline.Cluster, Log: f.Log}, "--types=azure")
	if err != nil {
		t.Fatal(err)
	}
	if err := purger.Handler.Handle(ctx, f.purgeDue(old, oldDue)); err != nil {
		t.Fatalf("the old entry's purge: %v", err)
	}
	if n := len(f.list(name + "/")); n != len(data) {
		t.Fatalf("the old entry's purge deleted %d of the new entry's %d blobs", len(data)-n, len(data))
	}
	if err := purger.Handler.Handle(ctx, f.purgeDue(recreated, newDue)); err != nil {
		t.Fatalf("the new entry's purge: %v", err)
	}
	if n := len(f.list(name + "/")); n != 0 {
		t.Errorf("the new entry's own purge left %d of %d blobs", n, len(data))
	}
	f.waitGone(name)
}

// deleteUntilPending deletes an entry and waits until the entry function scheduled its purge;
// it returns the due time.
func (f *fixture) deleteUntilPending(e *extensionsv1alpha1.BackupEntry) time.Time {
	f.T.Helper()
	f.delete(e)
	live := &extensionsv1alpha1.BackupEntry{}
	f.waitState(live, e.Name, gardencorev1beta1.LastOperationStatePending)
	return live.DeletionTimestamp.Time
}

// purgeDue is the purge-due event the entry function schedules for e.
func (f *fixture) purgeDue(e *extensionsv1alpha1.BackupEntry, due time.Time) cloudevents.Event {
	f.T.Helper()
	data := events.PurgeData{Entry: e.Name, UID: string(e.UID), BucketName: e.Spec.BucketName, Prefix: e.Name + "/", DueAt: due}
	ev, err := events.NewPurgeEvent(pipeline.Cluster, events.OpPurgeDue, kube.Ref(events.KindBackupEntry, e), data, time.Now())
	if err != nil {
		f.T.Fatal(err)
	}
	return ev
}

const helperEnv = "HOUSEKEEPER_TEST_PURGE_HELPER"

// A purge of 2000 blobs killed midway is redelivered and finishes: no blob left in the prefix,
// none deleted outside it. The entry is not due when it is deleted (a retention of seconds), so
// that its purge is scheduled and done by the purge function (the child, then this process):
// due at once, the entry function would purge it itself and the child would kill nothing (it
// did, and the test passed or failed on how fast that purge went).
func TestKilledPurgeFinishesAfterRedelivery(t *testing.T) {
	f := start(t, true)
	const name = "shoot--dev--big--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--big"}})
	e := newEntry(name, map[string]string{entry.AnnotationRetention: "8s"})
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	inside := snapshots(name+"/", 2000)
	outside := snapshots(name+"0/", 20)
	f.upload(slices.Concat(inside, outside)...)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, f.Env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHelperSlowPurgeProcess$", "-test.v")
	child.Env = append(os.Environ(), helperEnv+"="+kubeconfig+","+f.Env.NATS.URL)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	f.delete(e)
	f.Eventually(60*time.Second, "the child purge halfway", func() (bool, string) {
		n := len(f.list(name + "/"))
		return n > 0 && n < len(inside)-200, fmt.Sprintf("%d blobs left", n)
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	left := len(f.list(name + "/"))
	t.Logf("killed the purge with %d of %d blobs left", left, len(inside))

	f.RunFunction(entry.PurgeDefinition, objectstore.NewRegistry(azure.New()))
	f.waitGone(name)
	if n := len(f.list(name + "/")); n != 0 {
		t.Errorf("%d blobs left under the prefix", n)
	}
	if n := len(f.list(name + "0/")); n != len(outside) {
		t.Errorf("%d of %d blobs outside the prefix left", n, len(outside))
	}
}

// TestHelperSlowPurgeProcess is the purge worker TestKilledPurgeFinishesAfterRedelivery runs as
// a child process and kills; its store deletes slowly so that it can be killed midway.
func TestHelperSlowPurgeProcess(t *testing.T) {
	setting := os.Getenv(helperEnv)
	if setting == "" {
		t.Skip("child process of TestKilledPurgeFinishesAfterRedelivery")
	}
	runSlowPurge(t, setting)
}

// An entry due when it is deleted (retention 0, as gardenlet deletes it once its own grace
// period ended) is purged by the entry function, which has just read it live: no schedule, no
// purge function (none runs here), and exactly its prefix.
func TestDueEntryIsPurgedByTheEntryFunction(t *testing.T) {
	f := start(t, true)
	const name = "shoot--dev--now--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--now"}})
	e := newEntry(name, nil)
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	inside, outside := snapshots(name+"/", 30), snapshots("shoot--dev--now--10/", 10)
	f.upload(slices.Concat(inside, outside)...)

	f.delete(e)
	f.waitGone(name)
	if left := f.list(name + "/"); len(left) != 0 {
		t.Errorf("%d blobs left under %s/", len(left), name)
	}
	if left := f.list("shoot--dev--now--10/"); len(left) != len(outside) {
		t.Errorf("%d of %d blobs left outside the prefix", len(left), len(outside))
	}
	stream, err := f.JS.Stream(context.Background(), events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	due, _ := events.Subject(events.TypePurgeDue, name)
	for _, subject := range []string{events.PurgeScheduleSubject(name), due} {
		if m, err := stream.GetLastMsgForSubject(context.Background(), subject); err == nil {
			t.Errorf("a purge was scheduled: %s at sequence %d", subject, m.Sequence)
		}
	}
	audit, err := f.JS.Stream(context.Background(), events.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	completed, _ := events.Subject(events.TypePurgeCompleted, name)
	m, err := audit.GetLastMsgForSubject(context.Background(), completed)
	if err != nil {
		t.Fatalf("no %s event: %v", events.TypePurgeCompleted, err)
	}
	var data events.PurgeData
	if e, err := events.Decode(m.Header, m.Data); err != nil || e.DataAs(&data) != nil || data.Deleted != len(inside) {
		t.Errorf("purge completed event: %+v, %v", data, err)
	}
}
