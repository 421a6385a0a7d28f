package etcdbackup_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The fakes the fast tests (schedule_decisions_test.go, snapshot_decisions_test.go) run the
// schedule and snapshot functions over: controller-runtime's fake client, a JetStream that
// records what is published, and an object store in memory. No process is started.

// fakeScheme has the types the functions read and write.
var fakeScheme = func() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := backupv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// journal is the order in which the fakes saw the writes of one run: "publish <subject>",
// "patch", "status".
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// count tells how many entries start with prefix.
func (j *journal) count(prefix string) int {
	n := 0
	for _, e := range j.all() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// newFakeClient returns the fake API server holding objs, EtcdBackupConfig and RestoreDrill
// with their status subresource; patches and status updates go into j.
func newFakeClient(j *journal, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(fakeScheme).
		WithStatusSubresource(&backupv1alpha1.EtcdBackupConfig{}, &backupv1alpha1.RestoreDrill{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				j.add("patch")
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				j.add("%s", sub)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
}

// recordingJetStream records PublishMsg and answers it with err; onPublish, if set, runs
// first (to change the world while a publish is in flight). Any other method panics.
type recordingJetStream struct {
	jetstream.JetStream
	j         *journal
	err       error
	onPublish func()
	msgs      []testenv.Published
}

func (r *recordingJetStream) PublishMsg(_ context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if r.onPublish != nil {
		r.onPublish()
	}
	r.msgs = append(r.msgs, testenv.AsPublished(msg, opts))
	r.j.add("publish %s", msg.Subject)
	if r.err != nil {
		return nil, r.err
	}
	return &jetstream.PubAck{Stream: "fake", Sequence: uint64(len(r.msgs))}, nil
}

// memStore is a bucket in memory. statErr, listErr and deleteFails make its calls fail;
// calls counts them.
type memStore struct {
	mu          sync.Mutex
	objects     map[string][]byte
	statErr     error
	listErr     error
	deleteFails map[string]error // keys DeleteKeys reports as failed
	calls       int
}

func newMemStore(keys ...string) *memStore {
	s := &memStore{objects: map[string][]byte{}}
	for _, k := range keys {
		s.objects[k] = []byte("backup of " + k)
	}
	return s
}

func (s *memStore) call() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
}

func (s *memStore) Create(context.Context) error { s.call(); return nil }
func (s *memStore) Delete(context.Context) error { s.call(); return nil }

func (s *memStore) List(ctx context.Context, prefix string, fn func([]string) error) error {
	s.call()
	if s.listErr != nil {
		return s.listErr
	}
	var keys []string
	for _, k := range s.keys() {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return fn(keys)
}

func (s *memStore) DeleteKeys(_ context.Context, keys []string) (map[string]error, error) {
	s.call()
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := map[string]error{}
	for _, k := range keys {
		if err, ok := s.deleteFails[k]; ok {
			failed[k] = err
			continue
		}
		delete(s.objects, k)
	}
	return failed, nil
}

func (s *memStore) Upload(_ context.Context, key string, r io.Reader) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	s.call()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = data
	return int64(len(data)), nil
}

func (s *memStore) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	s.call()
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if s.statErr != nil {
		return objectstore.ObjectInfo{}, s.statErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.objects[key]
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("%s: %w", key, objectstore.ErrObjectNotFound)
	}
	return objectstore.ObjectInfo{Key: key, Size: int64(len(data))}, nil
}

func (s *memStore) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	s.call()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, objectstore.ErrObjectNotFound)
	}
	// Upload replaces the slice, never writes into it: the reader may share it.
	return io.NopCloser(bytes.NewReader(data)), nil
}

// keys lists what the store holds, sorted.
func (s *memStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.objects))
}

// memType is the provider type of memProvider.
const memType = "mem"

// memProvider opens its one store for any bucket; openErr fails Open. It records what Open
// was given.
type memProvider struct {
	store       *memStore
	openErr     error
	bucket      string
	credentials map[string][]byte
}

func (p *memProvider) Type() string { return memType }

func (p *memProvider) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	p.bucket, p.credentials = bucket, credentials
	if p.openErr != nil {
		return nil, p.openErr
	}
	return p.store, nil
}

func (p *memProvider) BackupSecretData(map[string][]byte) (map[string][]byte, error) {
	return nil, nil
}

// liveCondition returns the config namespace/name as the fake API server has it (nil if it
// is gone) and its condition typ (nil for none).
func liveCondition(t *testing.T, c client.Client, namespace, name, typ string) (*backupv1alpha1.EtcdBackupConfig, *metav1.Condition) {
	t.Helper()
	live := &backupv1alpha1.EtcdBackupConfig{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, live); err != nil {
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return nil, nil
	}
	return live, meta.FindStatusCondition(live.Status.Conditions, typ)
}
