package bridge

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// etcdBackupConfigInformer returns an informer on EtcdBackupConfigs (all namespaces), or nil
// if the API server does not serve backup.housekeeper.dev/v1alpha1: a seed where only
// Gardener's CRDs are installed runs the bridge without it (install the CRD, then restart).
func etcdBackupConfigInformer(cfg *rest.Config, resync time.Duration) (cache.SharedIndexInformer, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resources, err := dc.ServerResourcesForGroupVersion(backupv1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", backupv1alpha1.SchemeGroupVersion, err)
	}
	served := false
	for _, r := range resources.APIResources {
		served = served || r.Name == "etcdbackupconfigs"
	}
	if !served {
		return nil, nil
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
	return cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(rc, "etcdbackupconfigs", "", fields.Everything()),
		&backupv1alpha1.EtcdBackupConfig{}, resync, cache.Indexers{}), nil
}
