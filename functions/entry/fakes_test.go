package entry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The fakes the fast tests (decisions_test.go) run the entry Actuator and the Purger over:
// controller-runtime's fake client, made to answer as the API server does where the functions
// decide on its answer (a namespace missing or terminating on create, a uid precondition on
// delete, a conflict), a JetStream that records what is published, and a bucket in memory. No
// process is started.

// apiServer is the fake API server's behaviour beyond the fake client's: conflicts is how many
// patches of a Secret answer Conflict first (another writer got there between read and patch).
type apiServer struct {
	writes    testenv.APIWrites
	conflicts int
}

// newEntryClient returns the fake API server holding objs; BackupEntry and BackupBucket have
// their status subresource.
func (s *apiServer) newEntryClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(kube.Scheme).
		WithStatusSubresource(&extensionsv1alpha1.BackupBucket{}, &extensionsv1alpha1.BackupEntry{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				s.writes.Add("create", obj)
				if ns := obj.GetNamespace(); ns != "" {
					live := &corev1.Namespace{}
					if err := c.Get(ctx, client.ObjectKey{Name: ns}, live); err != nil {
						return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
					}
					if live.DeletionTimestamp != nil {
						err := apierrors.NewForbidden(corev1.Resource("secrets"), obj.GetName(), fmt.Errorf("namespace %s is being terminated", ns))
						err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
						return err
					}
				}
				return c.Create(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				s.writes.Add("patch", obj)
				if _, ok := obj.(*corev1.Secret); ok && s.conflicts > 0 && patch.Type() == "application/merge-patch+json" {
					s.conflicts--
					return apierrors.NewConflict(corev1.Resource("secrets"), obj.GetName(), fmt.Errorf("the object has been modified"))
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				s.writes.Add("delete", obj)
				o := (&client.DeleteOptions{}).ApplyOptions(opts)
				if o.Preconditions != nil && o.Preconditions.UID != nil {
					live := &metav1.PartialObjectMetadata{}
					live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil && live.UID != *o.Preconditions.UID {
						return apierrors.NewConflict(corev1.Resource("secrets"), obj.GetName(), fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *o.Preconditions.UID, live.UID))
					}
				}
				return c.Delete(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				s.writes.Add(sub, obj)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
}

// recordingJetStream records PublishMsg and answers it with err. Any other method panics.
type recordingJetStream struct {
	jetstream.JetStream
	mu   sync.Mutex
	err  error
	msgs []testenv.Published
}

func (r *recordingJetStream) PublishMsg(_ context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, testenv.AsPublished(msg, opts))
	if r.err != nil {
		return nil, r.err
	}
	return &jetstream.PubAck{Stream: "fake", Sequence: uint64(len(r.msgs))}, nil
}

// memStore is a bucket in memory. listErr fails List; outside is listed under every prefix (a
// store that lists what it should not); locked keys fail to delete with ErrObjectLocked until
// lockedUntil, and Mark marks them.
type memStore struct {
	mu          sync.Mutex
	objects     map[string]bool
	listErr     error
	outside     string
	locked      map[string]bool
	lockedUntil time.Time
	marked      []string
	// beforeList, if set, runs once, at the start of the first listing.
	beforeList func()
}

func newMemStore(keys ...string) *memStore {
	s := &memStore{objects: map[string]bool{}, locked: map[string]bool{}}
	for _, k := range keys {
		s.objects[k] = true
	}
	return s
}

func (s *memStore) Create(context.Context) error { return nil }
func (s *memStore) Delete(context.Context) error { panic("the entry functions delete no bucket") }

func (s *memStore) List(_ context.Context, prefix string, fn func([]string) error) error {
	if before := s.beforeList; before != nil {
		s.beforeList = nil
		before()
	}
	if s.listErr != nil {
		return s.listErr
	}
	var page []string
	for _, k := range s.keys() {
		if strings.HasPrefix(k, prefix) || k == s.outside {
			page = append(page, k)
		}
	}
	if len(page) == 0 {
		return nil
	}
	return fn(page)
}

func (s *memStore) DeleteKeys(_ context.Context, keys []string) (map[string]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := map[string]error{}
	for _, k := range keys {
		if s.locked[k] {
			failed[k] = fmt.Errorf("%s: %w", k, objectstore.ErrObjectLocked)
			continue
		}
		delete(s.objects, k)
	}
	return failed, nil
}

func (s *memStore) Upload(context.Context, string, io.Reader) (int64, error) {
	panic("the entry functions write no object")
}

func (s *memStore) Stat(context.Context, string) (objectstore.ObjectInfo, error) {
	panic("the entry functions read no object")
}

func (s *memStore) Open(context.Context, string) (io.ReadCloser, error) {
	panic("the entry functions read no object")
}

// keys lists what the store holds, sorted.
func (s *memStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.objects))
}

// lockingStore is memStore with object lock (S3's).
type lockingStore struct{ *memStore }

func (s lockingStore) Mark(_ context.Context, keys []string) (time.Time, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, keys...)
	return s.lockedUntil, "", nil
}

func (s lockingStore) Marked(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.marked, key), nil
}

// memType is the provider type of memProvider.
const memType = "mem"

// memProvider opens its one store for any bucket; openErr fails Open. It records the
// credentials Open was given.
type memProvider struct {
	mu      sync.Mutex
	store   objectstore.Store
	openErr error
	opened  []string // the credentials' "id" of each Open
}

func (p *memProvider) Type() string { return memType }

func (p *memProvider) Open(_ string, credentials map[string][]byte) (objectstore.Store, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opened = append(p.opened, string(credentials["id"]))
	if p.openErr != nil {
		return nil, p.openErr
	}
	return p.store, nil
}

func (p *memProvider) BackupSecretData(credentials map[string][]byte) (map[string][]byte, error) {
	return credentials, nil
}

// world is what the fake API server holds around one entry.
type world struct {
	name     string            // the entry's, if not fastEntry
	typ      string            // spec.type, if not mem
	ann      map[string]string // the entry's annotations
	deleting bool
	ours     bool   // our finalizer on it
	other    bool   // another controller's finalizer on it
	ns       string // the namespace: "" plain, "ours" (this shoot's uid), "foreign", "terminating", "missing"
	noBucket bool   // no BackupBucket (a source- entry's bucket is another seed's)
	extra    []client.Object
}

func (w world) entryName() string { return cmpOr(w.name, fastEntry) }

func (w world) objects(t *testing.T) []client.Object {
	t.Helper()
	e := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: w.entryName(), UID: fastUID, Annotations: w.ann},
		Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: cmpOr(w.typ, memType)}, BucketName: fastBucket,
			Region: "region-1", SecretRef: corev1.SecretReference{Namespace: "garden", Name: "entry-creds"}}}
	if w.ours {
		e.Finalizers = append(e.Finalizers, entry.Finalizer)
	}
	if w.other {
		e.Finalizers = append(e.Finalizers, "example.com/keep")
	}
	if w.deleting {
		e.DeletionTimestamp = &metav1.Time{Time: deletedAt}
	}
	objs := append([]client.Object{e, secret("garden", "entry-creds", map[string][]byte{"id": []byte("entry")}, entry.Finalizer),
		secret("garden", "bucket-creds", map[string][]byte{"id": []byte("bucket")}), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}}, w.extra...)
	if !w.noBucket {
		objs = append(objs, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: fastBucket}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: memType}, SecretRef: corev1.SecretReference{Namespace: "garden", Name: "bucket-creds"}}})
	}
	if w.ns != "missing" {
		objs = append(objs, namespace(w.ns))
	}
	return objs
}

// namespace is the shoot's namespace in state ("" plain, "ours", "foreign", "terminating").
func namespace(state string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fastNS}}
	switch state {
	case "ours":
		ns.Annotations = map[string]string{gardener.ShootUIDAnnotation: "6f1c"}
	case "foreign":
		ns.Annotations = map[string]string{gardener.ShootUIDAnnotation: "b2"}
	case "terminating":
		ns.Finalizers, ns.DeletionTimestamp = []string{"kubernetes"}, &metav1.Time{Time: deletedAt}
	}
	return ns
}

func secret(ns, name string, data map[string][]byte, finalizers ...string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}, Type: corev1.SecretTypeOpaque, Data: data}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// liveEntry reads the entry; nil if it is gone.
func liveEntry(t *testing.T, c client.Client, name string) *extensionsv1alpha1.BackupEntry {
	t.Helper()
	e := &extensionsv1alpha1.BackupEntry{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, e); err != nil {
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return nil
	}
	return e
}

func checkErr(t *testing.T, err error, class runner.Class, codes []gardencorev1beta1.ErrorCode) {
	t.Helper()
	err = gardener.Classify(err) // as the status writer records it
	got := runner.Class("")
	if err != nil {
		got = runner.ClassOf(err)
	}
	if got != class {
		t.Errorf("error %v: class %q, want %q", err, got, class)
	}
	if got := gardener.CodesOf(err); !slices.Equal(got, codes) {
		t.Errorf("codes %q, want %q", got, codes)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// publishedAs names what was published: the event's kind ("completed"), and for a schedule
// the event it holds and when the server fires it ("schedule due @at 2026-…").
func publishedAs(t *testing.T, entryName string, m testenv.Published) string {
	t.Helper()
	e, err := events.Decode(m.Header, m.Data)
	if err != nil {
		t.Fatalf("published on %s: %v", m.Subject, err)
	}
	_, kind, _ := strings.Cut(strings.TrimSuffix(e.Type(), ".v1"), "purge.")
	var data events.PurgeData
	if err := json.Unmarshal(e.Data(), &data); err != nil || data.Entry != entryName || data.Prefix != gardener.EntryPrefix(entryName) || data.BucketName != fastBucket {
		t.Errorf("%s about %+v (%v)", kind, data, err)
	}
	if m.Subject != events.PurgeScheduleSubject(entryName) {
		if want, _ := events.Subject(e.Type(), entryName); m.Subject != want {
			t.Errorf("%s published on %s, want %s", kind, m.Subject, want)
		}
		return kind
	}
	if target, _ := events.Subject(e.Type(), entryName); m.Header.Get(jetstream.ScheduleTargetHeader) != target ||
		m.Header.Get(jetstream.ScheduleTTLHeader) != entry.DueMessageTTL.String() {
		t.Errorf("schedule headers %v, want target %s and TTL %s", m.Header, target, entry.DueMessageTTL)
	}
	return "schedule " + kind + " " + m.Header.Get(jetstream.ScheduleHeader)
}

func at(t time.Time) string { return "@at " + t.UTC().Format(time.RFC3339Nano) }
