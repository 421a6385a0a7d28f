package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// makeInformers makes the bridge's informers with their handlers, none running yet: one per
// kind, the namespaces' and, per namespace once an object refers to it, the secrets'. An
// optional kind the API server does not serve yet gets its informer once it does (Run); those
// it serves now are part of the start's initial lists.
func (b *Bridge) makeInformers(core rest.Interface) error {
	b.secrets = &secretWatch{client: core, inUse: b.secretNamespaceInUse, handler: b.secretHandler, log: b.log}
	b.namespaces = cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core, "namespaces", "", fields.Everything()), &corev1.Namespace{}, 0, cache.Indexers{})
	if err := b.namespaces.SetTransform(dropManagedFields); err != nil {
		return err
	}
	reg, err := b.namespaces.AddEventHandler(b.namespaceHandler())
	if err != nil {
		return err
	}
	b.handlersSynced = append(b.handlersSynced, reg.HasSynced)
	for _, k := range kinds {
		w := &watchedKind{kind: k}
		b.watches = append(b.watches, w)
		if k.optional {
			served, err := b.source.served(k)
			if err != nil {
				return err
			}
			if !served {
				continue
			}
		}
		synced, err := b.watchKind(w)
		if err != nil {
			return err
		}
		b.handlersSynced = append(b.handlersSynced, synced)
	}
	return nil
}

// coreClient is a REST client of the core API group, for namespaces and secrets. Built-in
// types are watched as protobuf, which decodes at a fraction of JSON's cost (a seed's
// credentials change with every entry's finalizer).
func coreClient(cfg *rest.Config) (rest.Interface, error) {
	core := rest.CopyConfig(cfg)
	core.ContentType = kruntime.ContentTypeProtobuf
	core.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(core)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().RESTClient(), nil
}

func dropManagedFields(obj any) (any, error) {
	if o, ok := as[client.Object](obj); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// watchedKind is a kind watched by one bridge: its informer, once the API server serves the kind.
type watchedKind struct {
	*kind
	inf atomic.Value
}

// informer is the kind's informer, nil while the API server does not serve the kind.
func (w *watchedKind) informer() cache.SharedIndexInformer {
	inf, _ := w.inf.Load().(cache.SharedIndexInformer)
	return inf
}

// watchOf is the watched kind k, nil for a kind the bridge does not watch.
func (b *Bridge) watchOf(k events.Kind) *watchedKind {
	for _, w := range b.watches {
		if w.kind.kind == k {
			return w
		}
	}
	return nil
}

// informerOf is the informer of kind k, nil if it is not watched (yet).
func (b *Bridge) informerOf(k events.Kind) cache.SharedIndexInformer {
	if w := b.watchOf(k); w != nil {
		return w.informer()
	}
	return nil
}

// kindSource finds out whether the API server serves a kind and makes its informer (all
// namespaces, for a namespaced kind).
type kindSource struct {
	discovery discovery.DiscoveryInterface
	clients   map[schema.GroupVersion]rest.Interface
	resync    time.Duration
}

func newKindSource(cfg *rest.Config, resync time.Duration) (*kindSource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &kindSource{discovery: dc, clients: map[schema.GroupVersion]rest.Interface{}, resync: resync}
	for _, k := range kinds {
		if s.clients[k.gv] != nil {
			continue
		}
		if s.clients[k.gv], err = groupClient(cfg, k.gv); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// groupClient is a REST client of the API group version gv, decoding with kube.Scheme.
func groupClient(cfg *rest.Config, gv schema.GroupVersion) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(kube.Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// served reports whether the API server serves k.
func (s *kindSource) served(k *kind) (bool, error) {
	resources, err := s.discovery.ServerResourcesForGroupVersion(k.gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", k.gv, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == k.resource {
			return true, nil
		}
	}
	return false, nil
}

// informer is a new informer of k, custom resources served as JSON only: watched with a
// decoder that reads each event once (jsonListWatch).
func (s *kindSource) informer(k *kind, indexers cache.Indexers) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(jsonListWatch(s.clients[k.gv], k.resource, k.newObject), k.newObject(), s.resync, indexers)
}

// watchKind makes w's informer with its indexers and handler, not yet running, and returns
// whether the handler has its initial list.
func (b *Bridge) watchKind(w *watchedKind) (cache.InformerSynced, error) {
	inf := b.source.informer(w.kind, b.indexers(w.kind))
	// Trim what the informer caches: managedFields are large and no event carries them.
	if err := inf.SetTransform(dropManagedFields); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(b.objectHandler(w.kind))
	if err != nil {
		return nil, err
	}
	w.inf.Store(inf)
	return reg.HasSynced, nil
}

// indexers index k's objects by the objects they refer to.
func (b *Bridge) indexers(k *kind) cache.Indexers {
	return cache.Indexers{
		bySecretRef: func(obj any) ([]string, error) {
			if ref, ok := k.secretRef(obj); ok {
				return []string{ref.Namespace + "/" + ref.Name}, nil
			}
			return nil, nil
		},
		bySecretNamespace: func(obj any) ([]string, error) {
			if ns := b.secretNamespace(k, obj); ns != "" {
				return []string{ns}, nil
			}
			return nil, nil
		},
		byControlPlane: func(obj any) ([]string, error) {
			if ns, ok := k.controlPlane(obj); ok {
				return []string{ns}, nil
			}
			return nil, nil
		},
	}
}

// awaitKind looks for w's kind every CRDPollInterval until the API server serves it, then
// watches it until ctx is done. Its initial list is announced like any later change:
// housekeeper's own objects do not depend on the other kinds, so the start's rule (nothing
// published before every list is in) has nothing to protect here.
func (b *Bridge) awaitKind(ctx context.Context, w *watchedKind) {
	t := time.NewTicker(b.opts.CRDPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		served, err := b.source.served(w.kind)
		if err != nil {
			b.log.Warn("looking for a kind", zap.String("kind", string(w.kind.kind)), zap.Error(err))
			continue
		}
		if !served {
			continue
		}
		if _, err := b.watchKind(w); err != nil {
			b.log.Error("watching a kind", zap.String("kind", string(w.kind.kind)), zap.Error(err))
			return
		}
		b.log.Info("the API server serves the kind now: watching it", zap.String("kind", string(w.kind.kind)))
		w.informer().RunWithContext(ctx)
		return
	}
}
