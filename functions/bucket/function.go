package bucket

import (
	"context"
	"flag"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Definition declares the bucket function.
var Definition = runner.Definition{
	Name:  "bucket",
	Needs: runner.Needs{APIServer: true, Stores: true},
	// A bucket whose deletion waits for its entries is announced again by the bridge when one
	// of them is gone.
	Types: []string{events.TypeBucketCreated, events.TypeBucketUpdated, events.TypeBucketDeleting, events.TypeBucketSynced},
	Bind: func(fs *flag.FlagSet) runner.Constructor {
		scope := gardener.BindScope(fs)
		return func(_ context.Context, d runner.Deps) (runner.Handler, error) {
			s, err := scope(d.Stores)
			if err != nil {
				return nil, err
			}
			return newReconciler(d.Client, d.Stores, s, d.Log), nil
		}
	},
}

// newReconciler returns the bucket function's handler: the Gardener protocol around the
// Actuator.
func newReconciler(c client.Client, providers objectstore.Registry, scope gardener.Scope, log *zap.Logger) *gardener.Reconciler[*extensionsv1alpha1.BackupBucket] {
	return &gardener.Reconciler[*extensionsv1alpha1.BackupBucket]{
		Scope: scope,
		StatusWriter: gardener.StatusWriter[*extensionsv1alpha1.BackupBucket]{
			Client:    c,
			Kind:      events.KindBackupBucket,
			SecretRef: func(b *extensionsv1alpha1.BackupBucket) corev1.SecretReference { return b.Spec.SecretRef },
			Finalizer: Finalizer,
			Log:       log,
			Now:       time.Now,
		},
		NewObject: func() *extensionsv1alpha1.BackupBucket { return &extensionsv1alpha1.BackupBucket{} },
		Actuator:  &Actuator{Client: c, Providers: providers},
	}
}
