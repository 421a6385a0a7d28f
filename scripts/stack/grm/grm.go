// Package grm runs gardener-resource-manager in-process: the controllers of the gardener module
// (go.mod pins the version) that apply ManagedResources (managedresource: condition
// ResourcesApplied) and report the health of what they applied (health: ResourcesHealthy;
// progressing: ResourcesProgressing), configured as gardenlet deploys the resource manager of a
// seed — source and target the same cluster, class "seed", no cluster id, every namespace
// watched, ManagedResources applied again every hour and checked every minute.
//
// It runs against any API server it is given a configuration for: a stack.Kube (no node: no
// Deployment is ever rolled out and no Job ever runs, see the conformance suite), or the
// cluster of a stack.Node, where kube-controller-manager's controllers (TTL after finished,
// garbage collector, Deployments) act on what it applies.
//
// It is its own package, not a file of package stack, so that the gardener module's resource
// manager (and the API types it registers) is compiled only into the tests that run it.
//
// What it leaves out of the real binary (cmd/gardener-resource-manager): the webhooks (a seed's
// mutate pods and Deployments: high availability, projected tokens, seccomp profiles, …; they
// need a webhook server the API server calls), leader election, metrics and health endpoints,
// and the controllers that have nothing to do with applying and judging ManagedResources
// (garbage collector, network policies, token requestor, CSR approver, node). What it changes:
// the health controller reads metadata-only objects through healthTargetClient, which avoids a
// data race of the controller's own.
package grm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	resourcemanagerconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/resourcemanager/v1alpha1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	resourcemanagerclient "github.com/gardener/gardener/pkg/resourcemanager/client"
	"github.com/gardener/gardener/pkg/resourcemanager/controller/health/health"
	"github.com/gardener/gardener/pkg/resourcemanager/controller/health/progressing"
	"github.com/gardener/gardener/pkg/resourcemanager/controller/managedresource"
	resourcemanagerpredicate "github.com/gardener/gardener/pkg/resourcemanager/predicate"
)

// A seed's resource manager as gardenlet configures it (gardener v1.150.0:
// pkg/component/shared/resourcemanager.go runtimeGardenerResourceManagerDefaultValues,
// pkg/component/gardener/resourcemanager/resource_manager.go ensureConfigMap).
const (
	// SeedClass is the class of the ManagedResources it is responsible for; gardenlet's
	// ControllerInstallation reconciler creates its ManagedResources with it.
	SeedClass = v1beta1constants.SeedResourceManagerClass
	// SeedSyncPeriod is how often each ManagedResource is applied again when nothing changed.
	SeedSyncPeriod = time.Hour
	// SeedHealthSyncPeriod is how often the health and progressing controllers look again
	// without an event.
	SeedHealthSyncPeriod = time.Minute
)

// Options configure Start. The zero value of each field but Source is a seed's.
type Options struct {
	// Source is the cluster whose ManagedResources, and their Secrets, are read; required.
	Source *rest.Config
	// Target is the cluster the objects are applied to and checked in; nil: Source.
	Target *rest.Config
	// Class is the class of ManagedResources handled; "": SeedClass.
	Class string
	// ClusterID is written into each applied object's origin annotation; "": none (a seed's).
	ClusterID string
	// Namespaces are the source namespaces watched; nil: every namespace (a seed's).
	Namespaces []string
	// SyncPeriod is how often the managedresource controller applies a ManagedResource again
	// without an event; 0: SeedSyncPeriod. Resync forces one at once.
	SyncPeriod time.Duration
	// HealthSyncPeriod is how often the health and progressing controllers check again without
	// an event; 0: SeedHealthSyncPeriod.
	HealthSyncPeriod time.Duration
	// Logger receives the controllers' logs; zero: discarded.
	Logger logr.Logger
}

// A ResourceManager is a running resource manager.
type ResourceManager struct {
	// Config is the configuration it runs with, defaulted as the binary defaults it.
	Config resourcemanagerconfigv1alpha1.ResourceManagerConfiguration

	client   client.Client
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// Start starts the resource manager's controllers and returns once their caches are synced.
func Start(opts Options) (*ResourceManager, error) {
	if opts.Source == nil {
		return nil, errors.New("grm: no source cluster")
	}
	target := opts.Target
	if target == nil {
		target = opts.Source
	}
	class := opts.Class
	if class == "" {
		class = SeedClass
	}
	syncPeriod, healthSyncPeriod := opts.SyncPeriod, opts.HealthSyncPeriod
	if syncPeriod == 0 {
		syncPeriod = SeedSyncPeriod
	}
	if healthSyncPeriod == 0 {
		healthSyncPeriod = SeedHealthSyncPeriod
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}

	cfg := resourcemanagerconfigv1alpha1.ResourceManagerConfiguration{
		Controllers: resourcemanagerconfigv1alpha1.ResourceManagerControllerConfiguration{
			ClusterID:     ptr.To(opts.ClusterID),
			ResourceClass: ptr.To(class),
			// Enabled in a seed. Its controller is not run here (it deletes unreferenced
			// garbage-collectable Secrets and ConfigMaps twice a day), but the flag keeps the
			// managedresource controller from deleting such objects itself, as in a seed.
			GarbageCollector: resourcemanagerconfigv1alpha1.GarbageCollectorControllerConfig{
				Enabled: true, SyncPeriod: &metav1.Duration{Duration: 12 * time.Hour},
			},
			Health:          resourcemanagerconfigv1alpha1.HealthControllerConfig{SyncPeriod: &metav1.Duration{Duration: healthSyncPeriod}},
			ManagedResource: resourcemanagerconfigv1alpha1.ManagedResourceControllerConfig{SyncPeriod: &metav1.Duration{Duration: syncPeriod}},
		},
	}
	resourcemanagerconfigv1alpha1.SetObjectDefaults_ResourceManagerConfiguration(&cfg)
	cfg.SourceClientConnection.Namespaces = opts.Namespaces

	// As cmd/gardener-resource-manager/app: the defaulted configuration always has a target
	// connection, so the manager runs on the source with the source scheme and the target is a
	// cluster of its own (target scheme, a REST mapper that discovers CRDs applied later, no
	// cache for events).
	mgr, err := manager.New(opts.Source, manager.Options{
		Logger:                  log,
		Scheme:                  resourcemanagerclient.SourceScheme,
		GracefulShutdownTimeout: ptr.To(5 * time.Second),
		Cache: cache.Options{
			DefaultNamespaces: cacheNamespaces(opts.Namespaces),
			SyncPeriod:        &cfg.SourceClientConnection.CacheResyncPeriod.Duration,
		},
		Controller: controllerconfig.Controller{
			CacheSyncTimeout: cfg.Controllers.CacheSyncTimeout.Duration,
			// Controller names are unique per process; a test may run several resource managers.
			SkipNameValidation: ptr.To(true),
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("grm: %w", err)
	}
	targetCluster, err := cluster.New(target, func(o *cluster.Options) {
		o.Scheme = resourcemanagerclient.TargetScheme
		o.Logger = log
		o.MapperProvider = apiutil.NewDynamicRESTMapper
		o.Cache.DefaultNamespaces = cacheNamespaces(cfg.TargetClientConnection.Namespaces)
		o.Cache.SyncPeriod = &cfg.TargetClientConnection.CacheResyncPeriod.Duration
		o.Client.Cache = &client.CacheOptions{DisableFor: []client.Object{&corev1.Event{}, &eventsv1beta1.Event{}, &eventsv1.Event{}}}
	})
	if err != nil {
		return nil, fmt.Errorf("grm: target cluster: %w", err)
	}
	if err := mgr.Add(targetCluster); err != nil {
		return nil, fmt.Errorf("grm: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	// The health controllers (health, progressing) and the managedresource controller, as
	// pkg/resourcemanager/controller.AddToManager and controller/health.AddToManager add them;
	// the health controller reads the target through healthTargetClient.
	if err := (&health.Reconciler{
		Config:       cfg.Controllers.Health,
		ClassFilter:  resourcemanagerpredicate.NewClassFilter(*cfg.Controllers.ResourceClass),
		TargetClient: healthTargetClient{targetCluster.GetClient()},
	}).AddToManager(mgr, mgr, targetCluster, *cfg.Controllers.ClusterID); err != nil {
		cancel()
		return nil, fmt.Errorf("grm: adding the health controller: %w", err)
	}
	if err := (&progressing.Reconciler{
		Config:      cfg.Controllers.Health,
		ClassFilter: resourcemanagerpredicate.NewClassFilter(*cfg.Controllers.ResourceClass),
	}).AddToManager(ctx, mgr, mgr, targetCluster, *cfg.Controllers.ClusterID); err != nil {
		cancel()
		return nil, fmt.Errorf("grm: adding the progressing controller: %w", err)
	}
	if err := (&managedresource.Reconciler{
		Config:                    cfg.Controllers.ManagedResource,
		ClassFilter:               resourcemanagerpredicate.NewClassFilter(*cfg.Controllers.ResourceClass),
		ClusterID:                 *cfg.Controllers.ClusterID,
		GarbageCollectorActivated: cfg.Controllers.GarbageCollector.Enabled,
	}).AddToManager(mgr, mgr, targetCluster); err != nil {
		cancel()
		return nil, fmt.Errorf("grm: adding the managedresource controller: %w", err)
	}

	m := &ResourceManager{Config: cfg, client: mgr.GetClient(), cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, cfg.Controllers.CacheSyncTimeout.Duration)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) || !targetCluster.GetCache().WaitForCacheSync(syncCtx) {
		err := m.Stop()
		return nil, fmt.Errorf("grm: caches did not sync within %s (manager: %v)", cfg.Controllers.CacheSyncTimeout.Duration, err)
	}
	return m, nil
}

// Stop stops the controllers and returns the manager's error, if any; again, the same.
func (m *ResourceManager) Stop() error {
	m.stopOnce.Do(func() {
		m.cancel()
		m.stopErr = <-m.done
	})
	return m.stopErr
}

// Resync has the managedresource controller apply the ManagedResource again now, as it does
// every SyncPeriod: it sets the annotation gardener.cloud/operation=reconcile, which the
// controller removes before it applies (the way an operator forces it in a seed).
func (m *ResourceManager) Resync(ctx context.Context, key client.ObjectKey) error {
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := m.client.Get(ctx, key, mr); err != nil {
		return err
	}
	patch := client.MergeFrom(mr.DeepCopy())
	metav1.SetMetaDataAnnotation(&mr.ObjectMeta, v1beta1constants.GardenerOperation, v1beta1constants.GardenerOperationReconcile)
	return m.client.Patch(ctx, mr, patch)
}

// healthTargetClient is the health controller's client of the target. It reads a metadata-only
// object (of a kind the target scheme does not know, e.g. KEDA's ScaledObject) into a copy and
// copies back its ObjectMeta, leaving its TypeMeta (which the read would set to what it already
// is) alone. The health controller (gardener v1.150.0 pkg/resourcemanager/controller/health/
// health, reconciler.go:109-114 and add.go:101) starts a watch with the very object it then
// reads into, and the watch, starting in a goroutine of its own, reads that object's TypeMeta: a
// data race, harmless as the values written are the ones already there, which the race
// detector (the tests' -race) reports all the same.
type healthTargetClient struct{ client.Client }

func (c healthTargetClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	partial, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	into := &metav1.PartialObjectMetadata{}
	into.SetGroupVersionKind(partial.GroupVersionKind())
	if err := c.Client.Get(ctx, key, into, opts...); err != nil {
		return err
	}
	partial.ObjectMeta = into.ObjectMeta
	return nil
}

func cacheNamespaces(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := map[string]cache.Config{}
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}
