// Package kube connects housekeeper's processes to the Kubernetes API: the scheme with
// Gardener's extension types, REST configuration from a kubeconfig or the pod, and clients.
package kube

import (
	"context"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
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

// StartCache starts a controller-runtime cache with opts and waits until it has synced what
// opts.ByObject names; informers for other types start on first use. It runs until ctx is done.
func StartCache(ctx context.Context, cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	for obj := range opts.ByObject {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("starting the informer for %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("cache did not sync: %w", ctx.Err())
	}
	return c, nil
}
