package garden

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gardener/gardener/pkg/api/indexer"
	gardenletconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/gardenlet/v1alpha1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	kubernetesfake "github.com/gardener/gardener/pkg/client/kubernetes/fake"
	"github.com/gardener/gardener/pkg/gardenlet/controller/controllerinstallation/care"
	"github.com/gardener/gardener/pkg/gardenlet/controller/controllerinstallation/controllerinstallation"
	gardenletnetworkpolicy "github.com/gardener/gardener/pkg/gardenlet/controller/networkpolicy"
	"github.com/gardener/gardener/pkg/utils/oci"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// GardenletOptions configure StartGardenlet.
type GardenletOptions struct {
	// Garden is the garden the seed is registered in (Garden.Config); required.
	Garden *rest.Config
	// Seed is the seed's cluster; required.
	Seed *rest.Config
	// SeedName is the Seed in the garden; required with NetworkPolicies.
	SeedName string
	// CareSyncPeriod is how often the care controller reads every installation's
	// ManagedResource without an event; 0: gardenlet's default (30 s).
	CareSyncPeriod time.Duration
	// NetworkPolicies runs gardenlet's NetworkPolicy controller for the seed, configured as
	// gardenlet configures it from the Seed's spec.networks (read from the garden). The seed needs
	// ClusterCRD for it.
	NetworkPolicies bool
	// Logger receives the controllers' logs; zero: discarded.
	Logger logr.Logger
}

// A Gardenlet is gardenlet's installing part for one seed: its ControllerInstallation reconciler,
// called by ReconcileInstallation, and its controllers running in a manager on the seed.
type Gardenlet struct {
	installations *controllerinstallation.Reconciler
	cancel        context.CancelFunc
	done          chan error
	stopOnce      sync.Once
	stopErr       error
}

// StartGardenlet starts gardenlet's ControllerInstallation care controller (and NetworkPolicy
// controller) for the seed, as gardenlet adds them (pkg/gardenlet/controller.AddToManager) with
// their default configuration, and returns once their caches are synced.
func StartGardenlet(opts GardenletOptions) (*Gardenlet, error) {
	if opts.Garden == nil || opts.Seed == nil {
		return nil, errors.New("gardenlet: no garden or no seed")
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	gardenClient, err := client.New(opts.Garden, client.Options{Scheme: kubernetes.GardenScheme})
	if err != nil {
		return nil, fmt.Errorf("gardenlet: %w", err)
	}
	installations, err := installationReconciler(opts.Garden, gardenClient, opts.Seed)
	if err != nil {
		return nil, err
	}

	mgr, gardenCluster, err := NewManager(opts.Garden, opts.Seed, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	fail := func(what string, err error) (*Gardenlet, error) {
		cancel()
		return nil, fmt.Errorf("gardenlet: %s: %w", what, err)
	}
	if err := indexer.AddControllerInstallationRegistrationRefName(ctx, gardenCluster.GetFieldIndexer()); err != nil {
		return fail("indexing ControllerInstallations", err)
	}
	careConfig := gardenletconfigv1alpha1.ControllerInstallationCareControllerConfiguration{}
	if opts.CareSyncPeriod > 0 {
		careConfig.SyncPeriod = &metav1.Duration{Duration: opts.CareSyncPeriod}
	}
	gardenletconfigv1alpha1.SetDefaults_ControllerInstallationCareControllerConfiguration(&careConfig)
	if err := (&care.Reconciler{Config: careConfig, ManagedResourceNamespace: Namespace}).AddToManager(mgr, gardenCluster, mgr); err != nil {
		return fail("adding the ControllerInstallation care controller", err)
	}
	if opts.NetworkPolicies {
		seed := &gardencorev1beta1.Seed{}
		if err := gardenClient.Get(ctx, client.ObjectKey{Name: opts.SeedName}, seed); err != nil {
			return fail("the Seed "+opts.SeedName, err)
		}
		npConfig := gardenletconfigv1alpha1.NetworkPolicyControllerConfiguration{}
		gardenletconfigv1alpha1.SetDefaults_NetworkPolicyControllerConfiguration(&npConfig)
		// The seed's manager is its cluster, as in gardenlet; cancel stands in for gardenlet's
		// own cancel (the controller ends gardenlet when the seed becomes a garden).
		if err := gardenletnetworkpolicy.AddToManager(ctx, mgr, cancel, mgr, npConfig, seed.Spec.Networks, nil); err != nil {
			return fail("adding the NetworkPolicy controller", err)
		}
	}

	g := &Gardenlet{installations: installations, cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) || !gardenCluster.GetCache().WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("gardenlet: caches did not sync (manager: %v)", g.Stop())
	}
	return g, nil
}

// NewManager is a manager on the seed with the garden as a cluster of it (its cache holding the
// garden's objects), as gardenlet runs its controllers: the seed's scheme, no metrics or health
// endpoints, controller names not checked for uniqueness (a process may run several gardenlets).
func NewManager(garden, seed *rest.Config, log logr.Logger) (manager.Manager, cluster.Cluster, error) {
	mgr, err := manager.New(seed, manager.Options{
		Scheme:                 kubernetes.SeedScheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gardenlet: %w", err)
	}
	gardenCluster, err := cluster.New(garden, func(o *cluster.Options) {
		o.Scheme = kubernetes.GardenScheme
		o.Logger = log
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gardenlet: garden cluster: %w", err)
	}
	if err := mgr.Add(gardenCluster); err != nil {
		return nil, nil, fmt.Errorf("gardenlet: %w", err)
	}
	return mgr, gardenCluster, nil
}

// installationReconciler is gardenlet's ControllerInstallation reconciler for the seed.
// gardenlet's own client set refuses a Kubernetes newer than this gardener knows; its holder for
// tests takes the seed's real client and gardener's chart renderer as they are.
func installationReconciler(gardenConfig *rest.Config, gardenClient client.Client, seed *rest.Config) (*controllerinstallation.Reconciler, error) {
	seedClient, err := client.New(seed, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		return nil, fmt.Errorf("gardenlet: %w", err)
	}
	seedVersion, err := discovery.NewDiscoveryClientForConfigOrDie(seed).ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("gardenlet: the seed's version: %w", err)
	}
	seedSet := kubernetesfake.NewClientSetBuilder().WithClient(seedClient).WithRESTConfig(seed).
		WithChartRenderer(chartrenderer.NewWithServerVersion(seedVersion)).WithVersion(seedVersion.GitVersion).Build()
	root, err := stack.RepoRoot()
	if err != nil {
		return nil, err
	}
	version, err := stack.RequiredVersion(filepath.Join(root, "go.mod"), "github.com/gardener/gardener")
	if err != nil {
		return nil, err
	}
	return &controllerinstallation.Reconciler{
		GardenClient: gardenClient, GardenConfig: gardenConfig, SeedClientSet: seedSet, Clock: clock.RealClock{},
		Identity: &gardencorev1beta1.Gardener{Version: version}, GardenClusterIdentity: "garden", GardenNamespace: Namespace,
		// gardenlet's own puller: a chart in an OCI registry (helm.ociRepository) is pulled as
		// gardenlet pulls it.
		HelmRegistry: oci.NewHelmRegistry(gardenClient),
	}, nil
}

// ReconcileInstallation runs gardenlet's ControllerInstallation reconciler once for the
// installation: it renders the chart of the installation's ControllerDeployment with the seed's
// values into the ManagedResource garden/<name> in the seed (its objects in the namespace
// extension-<name>, which it creates) and writes the conditions Valid and Installed.
//
// A conflict is requeued as gardenlet's controller requeues it: the reconciler reads from a
// cache that may not yet hold an installation just created or changed (seen: "failed to add
// finalizer: ... the object has been modified").
func (g *Gardenlet) ReconcileInstallation(ctx context.Context, name string) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if _, err = g.installations.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); !apierrors.IsConflict(err) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("gardenlet's ControllerInstallation reconciler: %w", err)
	}
	return nil
}

// Stop stops the controllers and returns the manager's error, if any; again, the same.
func (g *Gardenlet) Stop() error {
	g.stopOnce.Do(func() {
		g.cancel()
		g.stopErr = <-g.done
	})
	return g.stopErr
}

// DeleteInstallation deletes the installation in the garden, as gardener-controller-manager
// does when a seed no longer needs it, and runs gardenlet's reconciler until it is gone: the
// ManagedResource deleted (its objects with it, by gardener-resource-manager), then the
// namespace extension-<name>, then the finalizer.
func (g *Gardenlet) DeleteInstallation(ctx context.Context, gardenClient client.Client, name string) error {
	ci := &gardencorev1beta1.ControllerInstallation{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := gardenClient.Delete(ctx, ci); err != nil {
		return fmt.Errorf("deleting ControllerInstallation %s: %w", name, err)
	}
	for {
		res, err := g.installations.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		if err != nil {
			return fmt.Errorf("gardenlet's ControllerInstallation reconciler, deleting %s: %w", name, err)
		}
		if err := gardenClient.Get(ctx, client.ObjectKey{Name: name}, ci); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		wait := res.RequeueAfter
		if wait == 0 {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ControllerInstallation %s still there: %w", name, ctx.Err())
		case <-time.After(wait):
		}
	}
}
