package bucket_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

type fixture struct {
	*pipeline.Pipeline
	localRoot string
}

// start runs bridge → NATS → bucket function against Azurite and a local root.
func start(t *testing.T) *fixture {
	p := pipeline.Start(t)
	root := t.TempDir()
	providers := objectstore.NewRegistry(azure.New(), local.New(root))
	p.RunFunction(bucket.Definition, providers)
	f := &fixture{Pipeline: p, localRoot: root}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	return f
}

func (f *fixture) create(obj client.Object) {
	f.T.Helper()
	if err := f.Client.Create(context.Background(), obj); err != nil {
		f.T.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (f *fixture) azureSecret(name, key string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "garden"},
		Data: map[string][]byte{
			azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
			azure.KeyStorageKey:     []byte(key),
			azure.KeyEndpoint:       []byte(f.Env.Azurite.Endpoint),
		},
	}
}

func newBucket(name, providerType, secret string) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			Region:      "westeurope",
			SecretRef:   corev1.SecretReference{Name: secret, Namespace: "garden"},
		},
	}
}

// state reads a bucket's lastOperation and lastError as one line.
func (f *fixture) state(name string) (*extensionsv1alpha1.BackupBucket, string) {
	b := &extensionsv1alpha1.BackupBucket{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, b); err != nil {
		return nil, err.Error()
	}
	s := "no lastOperation"
	if op := b.Status.LastOperation; op != nil {
		s = fmt.Sprintf("%s/%s %d%% %q", op.Type, op.State, op.Progress, op.Description)
	}
	if le := b.Status.LastError; le != nil {
		s += fmt.Sprintf(" lastError=%q codes=%v", le.Description, le.Codes)
	}
	return b, s
}

func (f *fixture) waitSucceeded(name string) *extensionsv1alpha1.BackupBucket {
	f.T.Helper()
	var b *extensionsv1alpha1.BackupBucket
	f.Eventually(30*time.Second, name+" Succeeded", func() (bool, string) {
		var s string
		b, s = f.state(name)
		return b != nil && b.Status.LastOperation != nil && b.Status.LastOperation.State == gardencorev1beta1.LastOperationStateSucceeded, s
	})
	return b
}

func (f *fixture) waitError(name, description string, code gardencorev1beta1.ErrorCode) {
	f.T.Helper()
	f.Eventually(30*time.Second, fmt.Sprintf("%s lastError %q with %s", name, description, code), func() (bool, string) {
		b, s := f.state(name)
		return b != nil && b.Status.LastError != nil && strings.Contains(b.Status.LastError.Description, description) &&
			slices.Contains(b.Status.LastError.Codes, code) && b.Status.LastOperation.State == gardencorev1beta1.LastOperationStateError, s
	})
}

func (f *fixture) secret(ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		f.T.Fatalf("reading secret %s/%s: %v", ns, name, err)
	}
	return s
}

func TestAzureBucketSucceedsWithAUsableGeneratedSecret(t *testing.T) {
	f := start(t)
	f.create(f.azureSecret("azure-creds", stack.AzuriteKey))
	f.create(newBucket("seed-azure", "azure", "azure-creds"))
	b := f.waitSucceeded("seed-azure")

	op := b.Status.LastOperation
	if op.Type != gardencorev1beta1.LastOperationTypeCreate || op.Progress != 100 || b.Status.LastError != nil || b.Status.ObservedGeneration != b.Generation {
		t.Errorf("status after create: %+v", b.Status)
	}
	if !slices.Contains(b.Finalizers, bucket.Finalizer) || !slices.Contains(f.secret("garden", "azure-creds").Finalizers, bucket.Finalizer) {
		t.Error("finalizer missing on the bucket or its secret")
	}
	ref := b.Status.GeneratedSecretRef
	if ref == nil || ref.Name != "generated-bucket-seed-azure" || ref.Namespace != "garden" {
		t.Fatalf("status.generatedSecretRef = %+v", ref)
	}
	// The generated secret's keys are enough to write into the container.
	gen := f.secret(ref.Namespace, ref.Name)
	cred, err := azblob.NewSharedKeyCredential(string(gen.Data["storageAccount"]), string(gen.Data["storageKey"]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential(string(gen.Data["endpoint"]), cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadBuffer(context.Background(), "seed-azure", "shoot--a--b--1/etcd-main/v2/Full-0-1-1", []byte("snapshot"), nil); err != nil {
		t.Errorf("writing with the generated secret: %v", err)
	}
}

func TestLocalBucketSucceeds(t *testing.T) {
	f := start(t)
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-creds", Namespace: "garden"}})
	b := newBucket("seed-local", "local", "local-creds")
	metav1.SetMetaDataAnnotation(&b.ObjectMeta, bucket.AnnotationGeneratedSecretNamespace, "shoot-backups")
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot-backups"}})
	f.create(b)
	b = f.waitSucceeded("seed-local")
	if info, err := os.Stat(filepath.Join(f.localRoot, "seed-local")); err != nil || !info.IsDir() {
		t.Errorf("bucket directory: %v", err)
	}
	if ref := b.Status.GeneratedSecretRef; ref == nil || ref.Namespace != "shoot-backups" {
		t.Fatalf("generated secret ignored the namespace annotation: %+v", ref)
	}
	// Empty, as provider-local's: hostPath goes into every entry's etcd-backup instead.
	if gen := f.secret("shoot-backups", "generated-bucket-seed-local"); len(gen.Data) != 0 {
		t.Errorf("generated secret data keys %v, want none (provider-local's is empty)", keys(gen.Data))
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Each bad input gets its lastError and code, and correcting it makes the bucket Succeeded
// with no other step.
func TestBadInputIsReportedAndCorrectionRecovers(t *testing.T) {
	f := start(t)
	ctx := context.Background()

	// No secret at all; then it is created.
	f.create(newBucket("missing-secret", "azure", "not-yet"))
	f.waitError("missing-secret", "secret garden/not-yet referenced by spec.secretRef does not exist", gardencorev1beta1.ErrorConfigurationProblem)
	f.create(f.azureSecret("not-yet", stack.AzuriteKey))
	f.waitSucceeded("missing-secret")

	// A secret without storageKey; then the key is added.
	incomplete := f.azureSecret("incomplete", "")
	delete(incomplete.Data, azure.KeyStorageKey)
	f.create(incomplete)
	f.create(newBucket("incomplete-secret", "azure", "incomplete"))
	f.waitError("incomplete-secret", "storageKey", gardencorev1beta1.ErrorConfigurationProblem)
	patch(t, f.Client, incomplete, func() { incomplete.Data[azure.KeyStorageKey] = []byte(stack.AzuriteKey) })
	f.waitSucceeded("incomplete-secret")

	// A wrong account key; then the right one.
	wrongKey := f.azureSecret("wrong-key", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
	f.create(wrongKey)
	f.create(newBucket("wrong-key", "azure", "wrong-key"))
	f.waitError("wrong-key", "", gardencorev1beta1.ErrorInfraUnauthenticated)
	patch(t, f.Client, wrongKey, func() { wrongKey.Data[azure.KeyStorageKey] = []byte(stack.AzuriteKey) })
	f.waitSucceeded("wrong-key")

	// A Kubernetes name that is no Azure container name.
	f.create(f.azureSecret("dotted-creds", stack.AzuriteKey))
	f.create(newBucket("seed.with.dots", "azure", "dotted-creds"))
	f.waitError("seed.with.dots", "seed.with.dots", gardencorev1beta1.ErrorConfigurationProblem)

	// A type housekeeper is not told to serve is never touched: no finalizer, no status, while
	// a bucket created after it is served.
	f.create(newBucket("foreign-type", "gcp", "dotted-creds"))
	f.create(newBucket("after-foreign", "azure", "dotted-creds"))
	f.waitSucceeded("after-foreign")
	foreign := &extensionsv1alpha1.BackupBucket{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: "foreign-type"}, foreign); err != nil {
		t.Fatal(err)
	}
	if len(foreign.Finalizers) > 0 || foreign.Status.LastOperation != nil || foreign.Status.LastError != nil {
		t.Errorf("a bucket of type gcp, which this function does not serve, was touched: finalizers %v, status %+v", foreign.Finalizers, foreign.Status)
	}

	// No lastError ever carries a secret value.
	list := &extensionsv1alpha1.BackupBucketList{}
	if err := f.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Items {
		if le := b.Status.LastError; le != nil && strings.Contains(le.Description, stack.AzuriteKey) {
			t.Errorf("%s lastError carries the account key", b.Name)
		}
	}
}

func patch(t *testing.T, c client.Client, obj client.Object, mutate func()) {
	t.Helper()
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	if err := c.Patch(context.Background(), obj, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteWaitsForEntriesThenRemovesContainerAndSecret(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.create(f.azureSecret("creds", stack.AzuriteKey))
	f.create(newBucket("doomed", "azure", "creds"))
	f.waitSucceeded("doomed")
	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--app--1", Finalizers: []string{"test/keep"}},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, BucketName: "doomed", Region: "westeurope",
			SecretRef: corev1.SecretReference{Name: "creds", Namespace: "garden"},
		},
	}
	f.create(entry)

	b, _ := f.state("doomed")
	if err := f.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.waitError("doomed", "BackupEntries still use bucket doomed (live or waiting for their purge): shoot--dev--app--1", gardencorev1beta1.ErrorRetryableInfraDependencies)
	if !containerExists(t, f, "doomed") {
		t.Fatal("container deleted while an entry still uses it")
	}

	// The entry goes away (its deletion, then the finalizer): the bucket follows.
	if err := f.Client.Delete(ctx, entry); err != nil {
		t.Fatal(err)
	}
	patch(t, f.Client, entry, func() { entry.Finalizers = nil })
	f.Eventually(30*time.Second, "bucket gone", func() (bool, string) {
		b, s := f.state("doomed")
		return b == nil && strings.Contains(s, "not found"), s
	})
	if containerExists(t, f, "doomed") {
		t.Error("container still exists")
	}
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "generated-bucket-doomed"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("generated secret: %v, want not found", err)
	}
	if slices.Contains(f.secret("garden", "creds").Finalizers, bucket.Finalizer) {
		t.Error("secretRef secret still carries the bucket finalizer")
	}
	if dls := f.DeadLetters(bucket.Definition.Name); len(dls) != 0 {
		t.Errorf("dead letters while waiting: %+v", dls)
	}
}

func containerExists(t *testing.T, f *fixture, name string) bool {
	t.Helper()
	cred, _ := azblob.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	c, err := azblob.NewClientWithSharedKeyCredential(f.Env.Azurite.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ServiceClient().NewContainerClient(name).GetProperties(context.Background(), nil)
	return err == nil
}

// A duplicated or replayed event changes nothing: no write to the bucket or the secrets.
func TestReplayedEventsChangeNothing(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.create(f.azureSecret("creds", stack.AzuriteKey))
	f.create(newBucket("stable", "azure", "creds"))
	f.waitSucceeded("stable")
	time.Sleep(time.Second) // let the events of the bucket's own writes settle
	before, _ := f.state("stable")
	genBefore := f.secret("garden", "generated-bucket-stable").ResourceVersion
	credsBefore := f.secret("garden", "creds").ResourceVersion

	res, err := runner.Replay(ctx, f.JS, bucket.Definition.Name, runner.Window{FromSeq: 1}, nil)
	if err != nil || res.Redriven == 0 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	f.Eventually(30*time.Second, "replayed events handled", func() (bool, string) {
		info, err := consumerInfo(f.JS, bucket.Definition.Name)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
	})
	after, _ := f.state("stable")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("replaying %d events changed the bucket: %+v → %+v", res.Redriven, before.Status.LastOperation, after.Status.LastOperation)
	}
	if rv := f.secret("garden", "generated-bucket-stable").ResourceVersion; rv != genBefore {
		t.Error("replay rewrote the generated secret")
	}
	if rv := f.secret("garden", "creds").ResourceVersion; rv != credsBefore {
		t.Error("replay rewrote the credentials secret")
	}
}

func consumerInfo(js jetstream.JetStream, name string) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, events.RecordStream, name)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// The operation annotation: reconcile is removed before the work and forces a Reconcile;
// wait-for-state makes the function do nothing.
func TestOperationAnnotation(t *testing.T) {
	f := start(t)
	f.create(f.azureSecret("creds", stack.AzuriteKey))
	f.create(newBucket("annotated", "azure", "creds"))
	b := f.waitSucceeded("annotated")
	created := b.Status.LastOperation.LastUpdateTime

	time.Sleep(1100 * time.Millisecond) // lastUpdateTime has a resolution of seconds
	patch(t, f.Client, b, func() { metav1.SetMetaDataAnnotation(&b.ObjectMeta, "gardener.cloud/operation", "reconcile") })
	f.Eventually(30*time.Second, "forced reconcile", func() (bool, string) {
		b, s := f.state("annotated")
		_, annotated := b.Annotations["gardener.cloud/operation"]
		op := b.Status.LastOperation
		return !annotated && op.Type == gardencorev1beta1.LastOperationTypeReconcile && op.State == gardencorev1beta1.LastOperationStateSucceeded &&
			op.LastUpdateTime.After(created.Time), s
	})

	b, _ = f.state("annotated")
	patch(t, f.Client, b, func() {
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, "gardener.cloud/operation", "wait-for-state")
		b.Spec.Region = "northeurope" // a new generation the function would otherwise reconcile
	})
	// The positive sign first: the update's event was delivered to the function and settled.
	updated, err := events.ObjectType(events.KindBackupBucket, events.OpUpdated)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.Subject(updated, "annotated")
	if err != nil {
		t.Fatal(err)
	}
	f.Eventually(30*time.Second, "the update's event handled", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := f.JS.Stream(ctx, events.RecordStream)
		if err != nil {
			return false, err.Error()
		}
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return false, "no update event yet: " + err.Error()
		}
		var gen struct {
			Metadata struct{ Generation int64 } `json:"metadata"`
		}
		if json.Unmarshal(msg.Data, &gen) != nil || gen.Metadata.Generation != b.Generation { // patch left the new generation in b
			return false, fmt.Sprintf("last update event has generation %d", gen.Metadata.Generation)
		}
		info, err := consumerInfo(f.JS, bucket.Definition.Name)
		if err != nil {
			return false, err.Error()
		}
		return info.Delivered.Stream >= msg.Sequence && info.NumAckPending == 0,
			fmt.Sprintf("event at %d, delivered up to %d, ack pending %d", msg.Sequence, info.Delivered.Stream, info.NumAckPending)
	})
	after, s := f.state("annotated")
	if after.Status.ObservedGeneration == after.Generation || after.Annotations["gardener.cloud/operation"] != "wait-for-state" {
		t.Errorf("wait-for-state was not honoured: generation %d observed %d, %s", after.Generation, after.Status.ObservedGeneration, s)
	}
}

// BackupBuckets do not migrate (upstream has no migrate path for them): a migrate annotation
// is reconciled like any change and the finalizer stays. On deletion the generated secret the
// status names is deleted, even when the annotation has since pointed elsewhere.
func TestNoMigrationAndTheGeneratedSecretOfTheStatusIsDeleted(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.create(f.azureSecret("creds", stack.AzuriteKey))
	f.create(newBucket("stays", "azure", "creds"))
	b := f.waitSucceeded("stays")

	patch(t, f.Client, b, func() { metav1.SetMetaDataAnnotation(&b.ObjectMeta, "gardener.cloud/operation", "migrate") })
	f.Eventually(30*time.Second, "migrate annotation handled as a reconcile", func() (bool, string) {
		b, s := f.state("stays")
		return b != nil && b.Status.LastOperation.Type == gardencorev1beta1.LastOperationTypeReconcile &&
			b.Status.LastOperation.State == gardencorev1beta1.LastOperationStateSucceeded, s
	})
	b, _ = f.state("stays")
	if !slices.Contains(b.Finalizers, bucket.Finalizer) || !slices.Contains(f.secret("garden", "creds").Finalizers, bucket.Finalizer) {
		t.Fatalf("finalizers after a migrate annotation: bucket %v, secret %v", b.Finalizers, f.secret("garden", "creds").Finalizers)
	}

	// The annotation now names a namespace that does not exist: the reconcile fails, the
	// status still names the secret in garden.
	patch(t, f.Client, b, func() {
		delete(b.Annotations, "gardener.cloud/operation")
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, bucket.AnnotationGeneratedSecretNamespace, "nowhere")
	})
	f.waitError("stays", "namespace nowhere for the generated secret does not exist", gardencorev1beta1.ErrorConfigurationProblem)
	b, _ = f.state("stays")
	if ref := b.Status.GeneratedSecretRef; ref == nil || ref.Namespace != "garden" {
		t.Fatalf("status.generatedSecretRef %v, want garden/generated-bucket-stays", ref)
	}
	if err := f.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.Eventually(30*time.Second, "bucket gone", func() (bool, string) {
		b, s := f.state("stays")
		return b == nil && strings.Contains(s, "not found"), s
	})
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "generated-bucket-stays"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the generated secret the status named: %v, want not found", err)
	}
}
