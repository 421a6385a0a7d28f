// Package kube connects housekeeper's processes to the Kubernetes API: the scheme with
// Gardener's extension types, REST configuration from a kubeconfig or the pod, and clients.
package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Scheme has the core Kubernetes types, Gardener's extension types and housekeeper's own
// backup types (backup.housekeeper.dev).
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := extensionsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := backupv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// NewClient returns a controller-runtime client (no cache) for Scheme.
func NewClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: Scheme})
}

// ExtensionsRESTClient returns a REST client for extensions.gardener.cloud/v1alpha1, the
// basis of list/watch for informers on BackupBuckets and BackupEntries.
func ExtensionsRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &extensionsv1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// StartCache starts a controller-runtime cache with opts, with the informers of what
// opts.ByObject names, once after is closed (nil: at once), and returns at once a reader of it
// that holds nothing until they have synced: it answers NotFound before, so a caller that reads
// live what the cache does not hold (the entry function) does so meanwhile. A process started
// for a waiting event thus serves it without first building a cache and listing every
// namespace and secret of the cluster, and does both only after (runtime.Deps.
// FirstEventSettled). A cache that cannot start is logged, and reads stay live. The cache runs
// until ctx is done.
func StartCache(ctx context.Context, cfg *rest.Config, opts cache.Options, after <-chan struct{}, log *zap.Logger) client.Reader {
	r := &warmingReader{}
	go func() {
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return
			}
		}
		start := time.Now()
		c, err := cache.New(cfg, opts)
		if err != nil {
			log.Warn("the cache cannot start: reading live", zap.Error(err))
			return
		}
		go func() { _ = c.Start(ctx) }()
		for obj := range opts.ByObject {
			if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
				log.Warn("the cache cannot start: reading live", zap.String("kind", obj.GetObjectKind().GroupVersionKind().Kind), zap.Error(err))
				return
			}
		}
		if c.WaitForCacheSync(ctx) {
			r.cache.Store(&c)
			log.Info("cache synced", zap.Duration("took", time.Since(start)))
		}
	}()
	return r
}

// warmingReader reads a cache once it has synced; before, it holds nothing.
type warmingReader struct {
	cache atomic.Pointer[cache.Cache] // set once synced
}

// errWarming: a list cannot say "none" for a cache that has not synced.
var errWarming = errors.New("the cache has not synced yet")

func (r *warmingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c := r.cache.Load()
	if c == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: obj.GetObjectKind().GroupVersionKind().Kind}, key.Name)
	}
	return (*c).Get(ctx, key, obj, opts...)
}

func (r *warmingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c := r.cache.Load()
	if c == nil {
		return errWarming
	}
	return (*c).List(ctx, list, opts...)
}
