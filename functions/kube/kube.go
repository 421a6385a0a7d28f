// Package kube connects housekeeper's processes to the Kubernetes API: the scheme with
// Gardener's extension types, REST configuration from a kubeconfig or the pod, and clients.
package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

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
// live what the cache does not hold (the entry function, CachedOrLive) does so meanwhile. A
// process started for a waiting event thus serves it without first building a cache and
// listing every namespace and secret of the cluster, and does both only after (runtime.Deps.
// FirstEventSettled). A kind of opts.ByObject that the API server does not serve (a CRD not
// installed) is answered with its NoMatch error, without a request, and looked for again every
// minute (notServedRetry): once served, the cache starts as above. A cache that cannot start
// otherwise is logged, and reads stay live. The cache runs until ctx is done.
func StartCache(ctx context.Context, cfg *rest.Config, opts cache.Options, after <-chan struct{}, log *zap.Logger) client.Reader {
	if opts.Scheme == nil {
		opts.Scheme = Scheme
	}
	r := &warmingReader{scheme: opts.Scheme}
	go func() {
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return
			}
		}
		start := time.Now()
		c, err := r.newCache(ctx, cfg, opts, log)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("the cache cannot start: reading live", zap.Error(err))
			}
			return
		}
		for obj := range opts.ByObject {
			if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
				log.Warn("the cache cannot start: reading live", zap.String("kind", obj.GetObjectKind().GroupVersionKind().Kind), zap.Error(err))
				return
			}
		}
		go func() { _ = c.Start(ctx) }()
		if c.WaitForCacheSync(ctx) {
			r.cache.Store(&c)
			log.Info("cache synced", zap.Duration("took", time.Since(start)))
		}
	}()
	return r
}

// notServedRetry is how often StartCache looks again for a kind the API server does not serve.
var notServedRetry = time.Minute

// newCache makes the cache of opts once the API server serves every kind it names; until then
// r answers the kinds it does not serve with their NoMatch errors.
func (r *warmingReader) newCache(ctx context.Context, cfg *rest.Config, opts cache.Options, log *zap.Logger) (cache.Cache, error) {
	for {
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, err
		}
		// A mapper of its own each time: what it discovered is what the cache then maps with.
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		missing := map[schema.GroupKind]error{}
		for obj := range opts.ByObject {
			gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
			if err != nil {
				return nil, err
			}
			switch _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); {
			case meta.IsNoMatchError(err):
				missing[gvk.GroupKind()] = err
			case err != nil:
				return nil, err
			}
		}
		if len(missing) == 0 {
			r.notServed.Store(nil)
			opts.HTTPClient, opts.Mapper = httpClient, mapper
			return cache.New(cfg, opts)
		}
		if r.notServed.Swap(&missing) == nil {
			log.Info("the API server does not serve a kind of the cache: reads of it find none; looking again every minute",
				zap.Strings("kinds", kindNames(missing)))
		}
		select {
		case <-time.After(notServedRetry):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func kindNames(kinds map[schema.GroupKind]error) []string {
	names := make([]string, 0, len(kinds))
	for gk := range kinds {
		names = append(names, gk.String())
	}
	slices.Sort(names)
	return names
}

// warmingReader reads a cache once it has synced; before, it holds nothing, and of a kind the
// API server does not serve it knows that.
type warmingReader struct {
	scheme    *runtime.Scheme
	cache     atomic.Pointer[cache.Cache]                // set once synced
	notServed atomic.Pointer[map[schema.GroupKind]error] // the kinds not served, while any is not
}

// errWarming: a list cannot say "none" for a cache that has not synced.
var errWarming = errors.New("the cache has not synced yet")

func (r *warmingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c := r.cache.Load(); c != nil {
		return (*c).Get(ctx, key, obj, opts...)
	}
	if err := r.unserved(obj); err != nil {
		return err
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: obj.GetObjectKind().GroupVersionKind().Kind}, key.Name)
}

func (r *warmingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c := r.cache.Load(); c != nil {
		return (*c).List(ctx, list, opts...)
	}
	if err := r.unserved(list); err != nil {
		return err
	}
	return errWarming
}

// unserved is the NoMatch error of obj's kind (a list's: of its items) while the API server
// does not serve it, else nil.
func (r *warmingReader) unserved(obj runtime.Object) error {
	missing := r.notServed.Load()
	if missing == nil {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return nil
	}
	return (*missing)[schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}]
}

// CachedOrLive reads from cached (a StartCache reader; nil: none) and, what it does not hold (a
// Get's NotFound: not synced yet, or not seen yet) or cannot list yet (not synced), from live.
// A kind the API server does not serve cached answers itself (NoMatch), without a request.
func CachedOrLive(cached, live client.Reader) client.Reader {
	if cached == nil {
		return live
	}
	return cachedOrLive{cached: cached, live: live}
}

type cachedOrLive struct{ cached, live client.Reader }

func (r cachedOrLive) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.cached.Get(ctx, key, obj, opts...); !apierrors.IsNotFound(err) {
		return err
	}
	return r.live.Get(ctx, key, obj, opts...)
}

func (r cachedOrLive) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.cached.List(ctx, list, opts...); !errors.Is(err, errWarming) {
		return err
	}
	return r.live.List(ctx, list, opts...)
}
