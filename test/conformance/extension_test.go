package conformance

import (
	"context"
	"path/filepath"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"k8s.io/utils/ptr"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gardener/gardener/pkg/client/kubernetes"
	localbackupbucket "github.com/gardener/gardener/pkg/provider-local/controller/backupbucket"
	localbackupentry "github.com/gardener/gardener/pkg/provider-local/controller/backupentry"
	"github.com/gardener/gardener/pkg/provider-local/controller/backupoptions"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// extension is the backup extension under test: it serves BackupBucket type "local" with its
// buckets as directories under root.
type extension interface {
	// name names the implementation in test names.
	name() string
	// start runs an instance of the extension for one seed until the test ends.
	start(t *testing.T, s *seedEnv, l *logs, root string)
	// watchesNamespaces reports whether the instance reacts to a shoot namespace that appears
	// after its BackupEntry was reconciled.
	watchesNamespaces() bool
}

// providerLocal is the control: upstream provider-local's BackupBucket and BackupEntry
// controllers, deployed as gardenlet expects an extension (reacting to the operation
// annotation gardenlet sets).
type providerLocal struct{}

func (providerLocal) name() string { return "provider-local" }

// provider-local reconciles only on gardenlet's operation annotation and watches namespaces only
// when it ignores that annotation (extensions/pkg/controller/backupentry.add): an entry whose
// namespace appears later keeps no etcd-backup (gardener#9749).
func (providerLocal) watchesNamespaces() bool { return false }

func (providerLocal) start(t *testing.T, s *seedEnv, l *logs, root string) {
	t.Helper()
	mgr, err := manager.New(s.kube.Config, manager.Options{
		Scheme:                 kubernetes.SeedScheme,
		Logger:                 l.logger(t, s.name+"-provider-local.log"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := backupoptions.AddOptions{BackupBucketPath: root, ContainerMountPath: root,
		ExtensionClasses: []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot, extensionsv1alpha1.ExtensionClassGarden}}
	ctx := context.Background()
	if err := localbackupbucket.AddToManagerWithOptions(ctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	if err := localbackupentry.AddToManagerWithOptions(ctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr, "provider-local on "+s.name)
}

// housekeeper runs nats-server, the bridge and the three functions as processes per seed.
type housekeeper struct {
	bin   func(t testing.TB) string
	azure *azureSide
	s3    *s3Side
}

func (housekeeper) name() string { return "housekeeper" }

func (housekeeper) watchesNamespaces() bool { return true }

func (h housekeeper) start(t *testing.T, s *seedEnv, l *logs, root string) {
	t.Helper()
	bin := h.bin(t)
	nats, err := stack.StartNATS(filepath.Join(l.dir, s.name+"-jetstream"), stack.NATSLogger(l.zap(t, s.name+"-nats-server.log")))
	if err != nil {
		t.Fatalf("nats-server for %s: %v", s.name, err)
	}
	t.Cleanup(nats.Stop)
	env := []string{
		"HOUSEKEEPER_NATS_URL=" + nats.URL,
		"HOUSEKEEPER_CLUSTER=" + s.name,
		"HOUSEKEEPER_TYPES=local,azure,aws",          // provider-local's type, as in the control run, and those of the Azure and S3 scenarios
		"HOUSEKEEPER_EXTENSION_CLASSES=shoot,garden", // gardener-operator's garden entry too, as the control run serves
		"HOUSEKEEPER_KUBECONFIG=" + s.kubeconfig,
	}
	if err := h.azure.start(t, l); err != nil {
		t.Fatalf("Azure for %s: %v", s.name, err)
	}
	env = append(env, h.azure.env()...)
	if err := h.s3.start(t, l); err != nil {
		t.Fatalf("S3 for %s: %v", s.name, err)
	}
	startHousekeeperProcesses(t, s, l, stack.Housekeeper{Bin: bin, Env: env}, root, all.NamesOf(all.Gardener)...)
}
