// Package providerlocal builds upstream provider-local's BackupBucket and BackupEntry
// controllers in a controller-runtime manager, as provider-local adds them: the upstream side
// of test/bench, run in-process (the bursts) and as a process (test/bench/upstream).
package providerlocal

import (
	"context"
	"slices"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	localbackupbucket "github.com/gardener/gardener/pkg/provider-local/controller/backupbucket"
	localbackupentry "github.com/gardener/gardener/pkg/provider-local/controller/backupentry"
	"github.com/gardener/gardener/pkg/provider-local/controller/backupoptions"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Concurrency is provider-local's MaxConcurrentReconciles for its BackupBucket and BackupEntry
// controllers (cmd/gardener-extension-provider-local/app).
const Concurrency = 5

// NewManager returns a manager of cfg running both controllers for buckets under root. opts
// give leader election and the controllers' settings; the scheme, the logger, and metrics and
// probes (off: the benchmarks count requests themselves) are set here. ctx bounds what the
// controllers start. classes are the extension classes served, as provider-local's
// --extension-classes (none: shoot, upstream's default).
func NewManager(ctx context.Context, cfg *rest.Config, root string, log logr.Logger, opts manager.Options, classes ...extensionsv1alpha1.ExtensionClass) (manager.Manager, error) {
	opts.Scheme = kubernetes.SeedScheme
	opts.Logger = log
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	add := backupoptions.AddOptions{
		BackupBucketPath:   root,
		ContainerMountPath: root,
		Controller:         controller.Options{MaxConcurrentReconciles: Concurrency},
	}
	// Each controller filters the slice it is given in place: a copy each.
	add.ExtensionClasses = slices.Clone(classes)
	if err := localbackupbucket.AddToManagerWithOptions(ctx, mgr, add); err != nil {
		return nil, err
	}
	add.ExtensionClasses = slices.Clone(classes)
	if err := localbackupentry.AddToManagerWithOptions(ctx, mgr, add); err != nil {
		return nil, err
	}
	return mgr, nil
}
