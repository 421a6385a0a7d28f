package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gardener/gardener/pkg/api/indexer"
	gardenletconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/gardenlet/v1alpha1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	"github.com/gardener/gardener/pkg/gardenlet/controller/backupbucket"
	"github.com/gardener/gardener/pkg/gardenlet/controller/backupentry"
	tokenrequestorworkloadidentity "github.com/gardener/gardener/pkg/gardenlet/controller/tokenrequestor/workloadidentity"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	stackgarden "github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
)

// gardenlet's configuration in the suite: a 24 h grace period for production shoots only, so an
// evaluation shoot's entry is deleted at once and a production shoot's waits.
const deletionGracePeriodHours = 24

// seedEnv is one seed: its own kube-apiserver, gardenlet's BackupBucket and BackupEntry
// reconcilers, and an instance of the extension under test.
type seedEnv struct {
	name       string
	seed       *gardencorev1beta1.Seed
	client     client.Client // the seed's API server, seed scheme
	kubeconfig string        // file for processes
	kube       *stack.Kube

	// holdExtensionDeletes, while set, blocks gardenlet's deletes of extension BackupEntries on
	// this seed, so a test can choose when gardenlet's delete lands.
	holdExtensionDeletes atomic.Bool
}

func init() {
	// gardenlet's waits on extension objects, shortened as upstream's integration tests do.
	backupentry.RequeueDurationWhenResourceDeletionStillPresent = time.Second
	backupbucket.RequeueDurationWhenResourceDeletionStillPresent = time.Second
}

// startSeed starts a seed's API server, registers the Seed in the garden and runs gardenlet's
// backup reconcilers for it until the test ends.
func startSeed(t *testing.T, g *garden, l *logs, clk *shiftClock, name string) *seedEnv {
	t.Helper()
	ctx := context.Background()
	kube, err := stack.StartKube(l.file(t, name+"-kube-apiserver.log"))
	if err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.Stop() })
	// gardenlet reads the shoot from the seed's Cluster resource to map extension BackupEntry
	// events to core BackupEntries.
	if _, err := envtest.InstallCRDs(kube.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(gardenerModuleDir(t), "pkg", "component", "extensions", "crds", "assets", "crd-extensions.gardener.cloud_clusters.yaml")},
	}); err != nil {
		t.Fatalf("seed %s: installing the Cluster CRD: %v", name, err)
	}
	kubeconfig := filepath.Join(l.dir, name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	seedClient, err := client.New(kube.Config, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := seedClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}); err != nil {
		t.Fatal(err)
	}
	s := &seedEnv{name: name, client: seedClient, kubeconfig: kubeconfig, kube: kube}

	s.seed = newSeed(name, "local", "local")
	if err := g.client.Create(ctx, s.seed); err != nil {
		t.Fatalf("creating Seed %s: %v", name, err)
	}

	log := l.logger(t, name+"-gardenlet.log")
	mgr, gardenCluster, err := stackgarden.NewManager(g.cfg, kube.Config, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := indexer.AddBackupEntryBucketName(ctx, gardenCluster.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	// Limit gardenlet's exponential backoff as upstream's integration tests do.
	rateLimiter := func() workqueue.TypedRateLimiter[reconcile.Request] {
		return workqueue.NewTypedWithMaxWaitRateLimiter(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), time.Second)
	}
	if err := (&backupbucket.Reconciler{
		Clock:       clk,
		Config:      gardenletconfigv1alpha1.BackupBucketControllerConfiguration{ConcurrentSyncs: ptr.To(5)},
		SeedName:    name,
		RateLimiter: rateLimiter(),
	}).AddToManager(mgr, gardenCluster, mgr); err != nil {
		t.Fatal(err)
	}
	entrySeedClient := &holdingClient{Client: mgr.GetClient(), seed: s, log: log.WithName("conformance")}
	if err := (&backupentry.Reconciler{
		SeedClient: entrySeedClient,
		Clock:      clk,
		Config: gardenletconfigv1alpha1.BackupEntryControllerConfiguration{
			ConcurrentSyncs:                  ptr.To(5),
			DeletionGracePeriodHours:         ptr.To(deletionGracePeriodHours),
			DeletionGracePeriodShootPurposes: []gardencorev1beta1.ShootPurpose{gardencorev1beta1.ShootPurposeProduction},
		},
		SeedName:    name,
		RateLimiter: rateLimiter(),
	}).AddToManager(mgr, gardenCluster, mgr); err != nil {
		t.Fatal(err)
	}
	// The token requestor fills the token of every seed secret marked as a workload
	// identity's, from gardener-apiserver's WorkloadIdentity token subresource.
	if err := (&tokenrequestorworkloadidentity.Reconciler{
		Clock: clk,
		Config: &gardenletconfigv1alpha1.TokenRequestorWorkloadIdentityControllerConfiguration{
			ConcurrentSyncs: ptr.To(5), TokenExpirationDuration: &metav1.Duration{Duration: time.Hour},
		},
	}).AddToManager(mgr, mgr, gardenCluster); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr, "gardenlet "+name)
	return s
}

// runManager starts mgr until the test ends.
func runManager(t *testing.T, mgr manager.Manager, what string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("%s: caches did not sync", what)
	}
}

// holdingClient is gardenlet's seed client for the BackupEntry reconciler: it blocks deletes of
// extension BackupEntries while the seed holds them, and shows gardenlet an extension
// BackupEntry's migration only once the extension has settled it.
type holdingClient struct {
	client.Client
	seed *seedEnv
	log  logr.Logger
}

// migrationSettleTimeout bounds how long a read of a migrating extension BackupEntry is held.
const migrationSettleTimeout = 30 * time.Second

// Get holds gardenlet's read of an extension BackupEntry whose lastOperation is Migrate
// Processing until the extension has settled the migration (Succeeded, Error or Failed).
//
// gardenlet (v1.150.0 pkg/gardenlet/controller/backupentry/reconciler.go:455-499) handles only a
// settled Migrate: Processing falls out of the switch, and gardenlet deletes the extension
// secret and marks the core BackupEntry migrated (reconciler.go:502-508), which clears
// status.seedName (:590). The destination seed is then responsible, the source gardenlet skips
// the entry as not its own (:89-91), and the source extension object is never deleted. gardenlet
// is woken only by Succeeded or Error (predicateutils.LastOperationChanged), so it would never
// read Processing but for the extension library's second migrate: its own finalizer and status
// writes, made while the migrate annotation is still on the object, requeue it, and the second
// pass writes Migrate Processing again (extensions/pkg/controller/backupentry/reconciler.go:240)
// within milliseconds of the first pass's Succeeded, which is what gardenlet, woken by that
// Succeeded, can read after its own status write to the garden. Upstream's integration test
// (test/integration/gardenlet/backupentry, "migrate") shows gardenlet only a settled Migrate
// Succeeded; so does this hold. housekeeper writes Migrate Succeeded at once, so its runs are
// never held.
func (c *holdingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	be, ok := obj.(*extensionsv1alpha1.BackupEntry)
	if !ok || !migrationProcessing(be) {
		return nil
	}
	c.log.Info("Holding gardenlet's read of the extension BackupEntry until the extension has settled its migration", "name", key.Name)
	deadline := time.Now().Add(migrationSettleTimeout)
	for migrationProcessing(be) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
	}
	op := be.Status.LastOperation
	c.log.Info("Released gardenlet's read of the extension BackupEntry", "name", key.Name, "lastOperation", string(op.Type)+"/"+string(op.State))
	return nil
}

func migrationProcessing(be *extensionsv1alpha1.BackupEntry) bool {
	op := be.Status.LastOperation
	return op != nil && op.Type == gardencorev1beta1.LastOperationTypeMigrate &&
		(op.State == gardencorev1beta1.LastOperationStateProcessing || op.State == gardencorev1beta1.LastOperationStatePending)
}

func (c *holdingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*extensionsv1alpha1.BackupEntry); ok {
		// Block rather than fail: a failed delete is retried within a second, and a retry can
		// read the extension's second Migrate Processing (see Get) and finish the migration while
		// the extension object still exists. A blocked delete lands once, when the test releases
		// it.
		for c.seed.holdExtensionDeletes.Load() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("conformance test held the deletion of extension BackupEntries on this seed: %w", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// newSeed is a Seed of the provider type in region, with what gardener-apiserver requires.
func newSeed(name, providerType, region string) *gardencorev1beta1.Seed {
	dns := corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Name: "dns", Namespace: "garden"}
	return &gardencorev1beta1.Seed{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gardencorev1beta1.SeedSpec{
			Provider: gardencorev1beta1.SeedProvider{Region: region, Type: providerType},
			Ingress: &gardencorev1beta1.Ingress{
				Domain:     name + ".seed.example.com",
				Controller: gardencorev1beta1.IngressController{Kind: "nginx"},
			},
			DNS: gardencorev1beta1.SeedDNS{
				Provider: &gardencorev1beta1.SeedDNSProvider{Type: "local", CredentialsRef: &dns},
				Internal: &gardencorev1beta1.SeedDNSProviderConfig{Type: "local", Domain: "internal.example.com", CredentialsRef: dns},
			},
			Networks: gardencorev1beta1.SeedNetworks{Pods: "10.0.0.0/16", Services: "10.1.0.0/16", Nodes: ptr.To("10.2.0.0/16")},
		},
	}
}
