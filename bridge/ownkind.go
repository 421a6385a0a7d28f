package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// ownKind is one of housekeeper's own kinds (backup.housekeeper.dev) the bridge announces. A
// seed where only Gardener's CRDs are installed runs the bridge without them, and their CRDs
// may be installed later: the bridge watches each kind once the API server serves it.
type ownKind struct {
	kind      events.Kind
	resource  string
	newObject func() kruntime.Object
	// inf holds the kind's informer once the API server serves the kind.
	inf atomic.Value
}

// newOwnKinds are the own kinds the bridge announces, none watched yet.
func newOwnKinds() []*ownKind {
	return []*ownKind{
		{kind: events.KindEtcdBackupConfig, resource: "etcdbackupconfigs",
			newObject: func() kruntime.Object { return &backupv1alpha1.EtcdBackupConfig{} }},
		{kind: events.KindRestoreDrill, resource: "restoredrills",
			newObject: func() kruntime.Object { return &backupv1alpha1.RestoreDrill{} }},
		{kind: events.KindBackupCopyPolicy, resource: "backupcopypolicies",
			newObject: func() kruntime.Object { return &backupv1alpha1.BackupCopyPolicy{} }},
	}
}

// informer is the kind's informer, nil while the API server does not serve the kind.
func (k *ownKind) informer() cache.SharedIndexInformer {
	inf, _ := k.inf.Load().(cache.SharedIndexInformer)
	return inf
}

// ownKindSource finds out whether the API server serves an own kind and makes its informer
// (all namespaces, for a namespaced kind).
type ownKindSource struct {
	discovery discovery.DiscoveryInterface
	client    rest.Interface
	resync    time.Duration
}

func newOwnKindSource(cfg *rest.Config, resync time.Duration) (*ownKindSource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &backupv1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(kube.Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &ownKindSource{discovery: dc, client: rc, resync: resync}, nil
}

// served reports whether the API server serves k.
func (s *ownKindSource) served(k *ownKind) (bool, error) {
	resources, err := s.discovery.ServerResourcesForGroupVersion(backupv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", backupv1alpha1.SchemeGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == k.resource {
			return true, nil
		}
	}
	return false, nil
}

func (s *ownKindSource) informer(k *ownKind) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(jsonListWatch(s.client, k.resource, k.newObject), k.newObject(), s.resync, cache.Indexers{})
}

// ownInformers are the informers of the own kinds the API server serves, by kind.
func (b *Bridge) ownInformers() map[events.Kind]cache.SharedIndexInformer {
	infs := map[events.Kind]cache.SharedIndexInformer{}
	for _, k := range b.ownKinds {
		if inf := k.informer(); inf != nil {
			infs[k.kind] = inf
		}
	}
	return infs
}

// watchOwnKind makes k's informer with its handler, not yet running, and returns whether the
// handler has its initial list.
func (b *Bridge) watchOwnKind(k *ownKind) (cache.InformerSynced, error) {
	inf := b.ownSource.informer(k)
	if err := inf.SetTransform(dropManagedFields); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(b.objectHandler(k.kind))
	if err != nil {
		return nil, err
	}
	k.inf.Store(inf)
	return reg.HasSynced, nil
}

// awaitOwnKind looks for k every CRDPollInterval until the API server serves it, then watches
// it until ctx is done. Its initial list is announced like any later change: housekeeper's own
// objects do not depend on the other kinds, so the start's rule (nothing published before
// every list is in) has nothing to protect here.
func (b *Bridge) awaitOwnKind(ctx context.Context, k *ownKind) {
	t := time.NewTicker(b.opts.CRDPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		served, err := b.ownSource.served(k)
		if err != nil {
			b.log.Warn("looking for a kind", zap.String("kind", string(k.kind)), zap.Error(err))
			continue
		}
		if !served {
			continue
		}
		if _, err := b.watchOwnKind(k); err != nil {
			b.log.Error("watching a kind", zap.String("kind", string(k.kind)), zap.Error(err))
			return
		}
		b.log.Info("the API server serves the kind now: watching it", zap.String("kind", string(k.kind)))
		k.informer().RunWithContext(ctx)
		return
	}
}
