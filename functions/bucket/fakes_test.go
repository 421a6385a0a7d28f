package bucket_test

import (
	"context"
	"io"
	"slices"
	"sync"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The fakes the fast tests (decisions_test.go) run the bucket Actuator over: controller-runtime's
// fake client, which refuses to create an object in a namespace that does not exist (as the API
// server does), a bucket in memory and providers that open it. No process is started.

// newBucketClient returns the fake API server holding objs; BackupBucket and BackupEntry have
// their status subresource. Every write goes into w.
func newBucketClient(w *testenv.APIWrites, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(kube.Scheme).
		WithStatusSubresource(&extensionsv1alpha1.BackupBucket{}, &extensionsv1alpha1.BackupEntry{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				w.Add("create", obj)
				if ns := obj.GetNamespace(); ns != "" {
					if err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
						return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
					}
				}
				return c.Create(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				w.Add("patch", obj)
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				w.Add("delete", obj)
				return c.Delete(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				w.Add(sub, obj)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
}

// memBucket is a bucket in memory: whether it exists, the objects it holds, the errors its
// calls answer and what it was asked.
type memBucket struct {
	mu        sync.Mutex
	exists    bool
	objects   []string
	createErr error
	deleteErr error
	// Configurable: CreateWithConfig is taken when configurable, answering note (or createErr).
	configurable bool
	note         string
	config       []byte // what CreateWithConfig was given
	calls        []string
}

func (s *memBucket) call(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, name)
}

func (s *memBucket) Create(context.Context) error {
	s.call("Create")
	if s.createErr != nil {
		return s.createErr
	}
	s.exists = true
	return nil
}

func (s *memBucket) Delete(context.Context) error {
	s.call("Delete")
	if s.deleteErr != nil {
		return s.deleteErr
	}
	s.exists, s.objects = false, nil
	return nil
}

func (s *memBucket) List(context.Context, string, func([]string) error) error {
	panic("the bucket function lists no object")
}

func (s *memBucket) DeleteKeys(context.Context, []string) (map[string]error, error) {
	panic("the bucket function deletes no object")
}

func (s *memBucket) Upload(context.Context, string, io.Reader) (int64, error) {
	panic("the bucket function writes no object")
}

func (s *memBucket) Stat(context.Context, string) (objectstore.ObjectInfo, error) {
	panic("the bucket function reads no object")
}

func (s *memBucket) Open(context.Context, string) (io.ReadCloser, error) {
	panic("the bucket function reads no object")
}

// configurableBucket is memBucket with CreateWithConfig (S3's object lock).
type configurableBucket struct{ *memBucket }

func (s configurableBucket) CreateWithConfig(_ context.Context, config []byte) (string, error) {
	s.call("CreateWithConfig")
	s.config = slices.Clone(config)
	if s.createErr != nil {
		return "", s.createErr
	}
	s.exists = true
	return s.note, nil
}

// memType is the type of memProvider.
const memType = "mem"

// memProvider opens its one bucket. Without data set, BackupSecretData hands back the
// credentials as they are. It records what Open was given.
type memProvider struct {
	typ     string
	bucket  *memBucket
	openErr error
	dataErr error
	data    func(map[string][]byte) (map[string][]byte, error) // BackupSecretData, if set
	opened  map[string][]byte                                  // the credentials of the last Open
	name    string                                             // the bucket name of the last Open
}

func (p *memProvider) Type() string { return p.typ }

func (p *memProvider) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	p.name, p.opened = bucket, credentials
	if p.openErr != nil {
		return nil, p.openErr
	}
	if p.bucket.configurable {
		return configurableBucket{p.bucket}, nil
	}
	return p.bucket, nil
}

func (p *memProvider) BackupSecretData(credentials map[string][]byte) (map[string][]byte, error) {
	if p.dataErr != nil {
		return nil, p.dataErr
	}
	if p.data != nil {
		return p.data(credentials)
	}
	return credentials, nil
}

// realKeys is memProvider whose Open validates the credentials and whose generated secret
// holds what a real provider's holds: the keys of real, the bucket of mem.
type realKeys struct {
	*memProvider
	real objectstore.Provider
}

func (p realKeys) Type() string { return p.real.Type() }

func (p realKeys) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	if _, err := p.real.Open(bucket, credentials); err != nil {
		return nil, err
	}
	return p.memProvider.Open(bucket, credentials)
}

func (p realKeys) BackupSecretData(credentials map[string][]byte) (map[string][]byte, error) {
	return p.real.BackupSecretData(credentials)
}

// provisioner is memProvider whose credentials with the key "management" are management
// credentials (an Azure service principal): Provision hands back storage, consumes the
// annotations in consumes and says description.
type provisioner struct {
	*memProvider
	storage        map[string][]byte
	consumes       []string
	description    string
	provisionErr   error
	deprovisionErr error
	got            *objectstore.Provisioning // what the last Provision or Deprovision was given
	deprovisioned  bool
}

func (p *provisioner) Manages(credentials map[string][]byte) bool {
	_, ok := credentials["management"]
	return ok
}

func (p *provisioner) Provision(_ context.Context, req objectstore.Provisioning) (objectstore.Provisioned, error) {
	p.got = &req
	if p.provisionErr != nil {
		return objectstore.Provisioned{}, p.provisionErr
	}
	return objectstore.Provisioned{Credentials: p.storage, Consumed: p.consumes, Description: p.description}, nil
}

func (p *provisioner) Deprovision(_ context.Context, req objectstore.Provisioning) error {
	p.got = &req
	if p.deprovisionErr != nil {
		return p.deprovisionErr
	}
	p.deprovisioned = true
	return nil
}
