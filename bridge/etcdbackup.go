package bridge

import (
	"context"
	"fmt"
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

// etcdBackupConfigSource makes the informer on EtcdBackupConfigs (all namespaces) once the
// API server serves backup.housekeeper.dev/v1alpha1: a seed where only Gardener's CRDs are
// installed runs the bridge without it, and the CRD may be installed later.
type etcdBackupConfigSource struct {
	discovery discovery.DiscoveryInterface
	client    rest.Interface
	resync    time.Duration
}

func newEtcdBackupConfigSource(cfg *rest.Config, resync time.Duration) (*etcdBackupConfigSource, error) {
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
	return &etcdBackupConfigSource{discovery: dc, client: rc, resync: resync}, nil
}

// served reports whether the API server serves EtcdBackupConfigs.
func (s *etcdBackupConfigSource) served() (bool, error) {
	resources, err := s.discovery.ServerResourcesForGroupVersion(backupv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", backupv1alpha1.SchemeGroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "etcdbackupconfigs" {
			return true, nil
		}
	}
	return false, nil
}

func (s *etcdBackupConfigSource) informer() cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(
		jsonListWatch(s.client, "etcdbackupconfigs", func() kruntime.Object { return &backupv1alpha1.EtcdBackupConfig{} }),
		&backupv1alpha1.EtcdBackupConfig{}, s.resync, cache.Indexers{})
}

// etcdBackupConfigs is the EtcdBackupConfig informer, nil while the API server does not
// serve the kind.
func (b *Bridge) etcdBackupConfigs() cache.SharedIndexInformer {
	inf, _ := b.configs.Load().(cache.SharedIndexInformer)
	return inf
}

// watchEtcdBackupConfigs makes the EtcdBackupConfig informer with its handler, not yet
// running, and returns whether the handler has its initial list.
func (b *Bridge) watchEtcdBackupConfigs() (cache.InformerSynced, error) {
	inf := b.configSource.informer()
	if err := inf.SetTransform(dropManagedFields); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(b.objectHandler(events.KindEtcdBackupConfig))
	if err != nil {
		return nil, err
	}
	b.configs.Store(inf)
	return reg.HasSynced, nil
}

// awaitEtcdBackupConfigs looks for the EtcdBackupConfig kind every CRDPollInterval until the
// API server serves it, then watches it until ctx is done. Its initial list is announced like
// any later change: EtcdBackupConfigs do not depend on the other kinds, so the start's rule
// (nothing published before every list is in) has nothing to protect here.
func (b *Bridge) awaitEtcdBackupConfigs(ctx context.Context) {
	t := time.NewTicker(b.opts.CRDPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		served, err := b.configSource.served()
		if err != nil {
			b.log.Warn("looking for the EtcdBackupConfig kind", zap.Error(err))
			continue
		}
		if !served {
			continue
		}
		if _, err := b.watchEtcdBackupConfigs(); err != nil {
			b.log.Error("watching EtcdBackupConfigs", zap.Error(err))
			return
		}
		b.log.Info("the API server serves EtcdBackupConfigs now: watching them")
		b.etcdBackupConfigs().RunWithContext(ctx)
		return
	}
}
