package entry_test

import (
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// On a real kube-apiserver, the entry function reads BackupCopyPolicies from its cache: once it
// has synced, reconciles of entries whose bucket a policy selects list no policy and read no
// bucket; a policy's fail-over, once the cache has it, points etcd-backup at the policy's
// destination, and its return at the bucket again; and an entry it purges itself has its copy
// in the policy's destination purged too.
func TestPoliciesAreReadFromTheCache(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	f := startEntryFunction(t, env)
	const bucketName = "cached-bucket"
	create(t, admin, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName, Labels: map[string]string{"copy": "yes"}},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}})
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "copies"}, Data: map[string][]byte{"token": []byte("copies")}})
	create(t, admin, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "copies"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: "copies",
			CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "copies"}}})
	create(t, admin, &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "copies"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets:     backupv1alpha1.BucketSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}},
		Destination: "copies", Schedule: "@daily"}})
	// A second policy, selecting another bucket, that has failed over: its bucket is read to
	// judge it, for every entry.
	create(t, admin, &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets: backupv1alpha1.BucketSelection{Names: []string{"another-bucket"}}, Destination: "copies", Schedule: "@daily", FailOver: true}})
	entries := f.entries(t, admin, bucketName, 5)

	f.synced(t, entries[0])
	for _, name := range entries {
		f.requests.reset()
		f.reconcile(t, name)
		for _, key := range []string{"list backupcopypolicies", "get backupbuckets", "list backupbuckets", "get namespaces"} {
			if n := f.requests.count(key); n != 0 {
				t.Errorf("reconcile of %s with the caches synced: %d requests %q, want none", name, n, key)
			}
		}
		f.pointsAt(t, name, bucketName)
	}

	setFailOver(t, admin, "copies", true)
	f.eventually(t, entries[0], "copies")
	for _, name := range entries {
		f.requests.reset()
		f.reconcile(t, name)
		f.pointsAt(t, name, "copies")
		if n := f.requests.count("list backupcopypolicies"); n != 0 {
			t.Errorf("reconcile of %s failed over: %d lists of backupcopypolicies, want none", name, n)
		}
	}
	setFailOver(t, admin, "copies", false)
	f.eventually(t, entries[0], bucketName)

	// A deleted entry due at once is purged by the function itself, and its copy with it: the
	// cache names the policy that selects its bucket, and so the destination.
	gone := entries[1]
	var stores []objectstore.Store
	for _, bucket := range []string{bucketName, "copies"} {
		store, err := local.New(f.root).Open(bucket, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Create(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := objectstore.PutBytes(t.Context(), store, gone+"/etcd-main/v2/Full-00000000-00000001-1", []byte("snapshot")); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, store)
	}
	be := &extensionsv1alpha1.BackupEntry{}
	if err := admin.Get(t.Context(), client.ObjectKey{Name: gone}, be); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&be.ObjectMeta, entry.AnnotationRetention, "0s")
	if err := admin.Update(t.Context(), be); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(t.Context(), be); err != nil {
		t.Fatal(err)
	}
	f.requests.reset()
	f.handle(t, events.OpDeleting, be)
	if n := f.requests.count("list backupcopypolicies"); n != 0 {
		t.Errorf("purge of %s: %d lists of backupcopypolicies, want none", gone, n)
	}
	for i, store := range stores {
		var left []string
		if err := store.List(t.Context(), gone+"/", func(page []string) error { left = append(left, page...); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			t.Errorf("%s holds %q under the purged entry's prefix, want nothing", []string{"the bucket", "the copy"}[i], left)
		}
	}
	if err := admin.Get(t.Context(), client.ObjectKey{Name: gone}, be); !apierrors.IsNotFound(err) {
		t.Errorf("the purged entry: %v, want it released and gone", err)
	}
}

// Without the BackupCopyPolicy CRD (etcdBackupConfig.enabled off), the entry function finds no
// policy without asking the API server, and its metadata cache runs all the same.
func TestNoPoliciesWithoutTheirCRD(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	testenv.DeleteCRD(t.Context(), t, env.Kube.Config, "backupcopypolicies.backup.housekeeper.dev")
	f := startEntryFunction(t, env)
	const bucketName = "uncopied-bucket"
	create(t, admin, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}})
	entries := f.entries(t, admin, bucketName, 3)

	f.synced(t, entries[0])
	for _, name := range entries {
		f.requests.reset()
		f.reconcile(t, name)
		f.pointsAt(t, name, bucketName)
		// get other: discovery, where a live read looks for the kind again.
		for _, key := range []string{"list backupcopypolicies", "get other", "get namespaces"} {
			if n := f.requests.count(key); n != 0 {
				t.Errorf("reconcile of %s: %d requests %q, want none (sent: %v)", name, n, key, f.requests.all())
			}
		}
	}
}

// entryFunction is the entry function, built as its binary builds it, on a client whose
// requests are counted.
type entryFunction struct {
	fn       runner.Function
	c        client.Client
	requests *requestCount
	root     string // the local provider's
}

func startEntryFunction(t *testing.T, env *testenv.Env) *entryFunction {
	t.Helper()
	requests := &requestCount{sent: map[string]int{}}
	cfg := kube.OnRequest(rest.CopyConfig(env.Kube.Config), requests.observe)
	c, err := kube.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	providers := objectstore.NewRegistry(local.New(root))
	fn, err := entry.Definition.Build(t.Context(), runner.Deps{Config: cfg, Client: c, JetStream: &recordingJetStream{}, Stores: providers,
		Cluster: "test", Log: zaptest.NewLogger(t)}, gardener.ScopeArgs(entry.Definition, local.Type)...)
	if err != nil {
		t.Fatal(err)
	}
	admin := env.Client(t)
	create(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "seed-local"}, Data: map[string][]byte{"token": []byte("local")}})
	return &entryFunction{fn: fn, c: c, requests: requests, root: root}
}

// entries creates n entries of the bucket and their shoots' namespaces, and has each
// reconciled once (claimed).
func (f *entryFunction) entries(t *testing.T, admin client.Client, bucketName string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		uid := fmt.Sprintf("9d1e2f3a-0000-4000-8000-%012d", i)
		name := fmt.Sprintf("shoot--dev--cached%d--%s", i, uid)
		create(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardener.EntryNamespace(name),
			Annotations: map[string]string{gardener.ShootUIDAnnotation: uid}}})
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName,
				Region: "local", SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}}
		create(t, admin, be)
		f.handle(t, events.OpCreated, be)
		names = append(names, name)
	}
	return names
}

// synced waits until a reconcile of name reads neither BackupCopyPolicies nor namespaces from
// the API server: both caches have synced.
func (f *entryFunction) synced(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the caches synced", func() (bool, string) {
		f.requests.reset()
		f.reconcile(t, name)
		return f.requests.count("list backupcopypolicies") == 0 && f.requests.count("get namespaces") == 0, fmt.Sprint(f.requests.all())
	})
}

// eventually waits until a reconcile of name points its etcd-backup at bucket.
func (f *entryFunction) eventually(t *testing.T, name, bucket string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "etcd-backup of "+name+" names "+bucket, func() (bool, string) {
		f.reconcile(t, name)
		got := f.bucketOf(t, name)
		return got == bucket, got
	})
}

// reconcile has the function reconcile the live entry name, as a synced event asks.
func (f *entryFunction) reconcile(t *testing.T, name string) {
	t.Helper()
	f.handle(t, events.OpSynced, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (f *entryFunction) handle(t *testing.T, op events.Operation, be *extensionsv1alpha1.BackupEntry) {
	t.Helper()
	e, err := pipeline.ObjectEvent(events.KindBackupEntry, op, be)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.fn.Handler.Handle(t.Context(), e); err != nil {
		t.Fatalf("%s of %s: %v", op, be.Name, err)
	}
}

func (f *entryFunction) pointsAt(t *testing.T, name, bucket string) {
	t.Helper()
	if got := f.bucketOf(t, name); got != bucket {
		t.Errorf("etcd-backup of %s names bucket %q, want %q", name, got, bucket)
	}
}

func (f *entryFunction) bucketOf(t *testing.T, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: gardener.EntryNamespace(name), Name: entry.SecretName}, s); err != nil {
		return err.Error()
	}
	return string(s.Data[entry.DataKeyBucketName])
}

func setFailOver(t *testing.T, c client.Client, policy string, on bool) {
	t.Helper()
	p := &backupv1alpha1.BackupCopyPolicy{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: policy}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.FailOver = on
	if err := c.Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

// requestCount counts API requests by verb and resource.
type requestCount struct {
	mu   sync.Mutex
	sent map[string]int
}

func (r *requestCount) observe(req *http.Request) {
	if kube.Verb(req) == "watch" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[kube.Verb(req)+" "+kube.Resource(req.URL.Path)]++
}

func (r *requestCount) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sent)
}

func (r *requestCount) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[key]
}

func (r *requestCount) all() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.sent)
}
