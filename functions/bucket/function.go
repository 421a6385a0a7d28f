package bucket

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// Name is the function's name: its consumer, dead-letter and redrive subjects.
const Name = "bucket"

// Types are the events the function takes. Besides its own BackupBucket events it takes
// BackupEntry deleted events: a bucket whose deletion waits for its entries is checked again
// when one of them is gone.
var Types = []string{
	events.TypeBucketCreated, events.TypeBucketUpdated, events.TypeBucketDeleting, events.TypeBucketSynced,
	events.TypeEntryDeleted,
}

// New returns the bucket function.
func New(c client.Client, providers objectstore.Registry, log *zap.Logger) runtime.Function {
	r := &gardener.Reconciler{
		Client:    c,
		Kind:      events.KindBackupBucket,
		NewObject: func() extensionsv1alpha1.Object { return &extensionsv1alpha1.BackupBucket{} },
		SecretRef: func(o extensionsv1alpha1.Object) corev1.SecretReference {
			return o.(*extensionsv1alpha1.BackupBucket).Spec.SecretRef
		},
		Finalizer: Finalizer,
		Actuator:  &Actuator{Client: c, Providers: providers},
		Log:       log,
		Now:       time.Now,
	}
	return runtime.Function{
		Name:  Name,
		Types: Types,
		Handler: runtime.HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
			if e.Type() == events.TypeEntryDeleted {
				return entryGone(ctx, c, r, e)
			}
			return r.Handle(ctx, e)
		}),
	}
}

// entryGone reconciles the bucket a deleted entry used, if that bucket is being deleted.
func entryGone(ctx context.Context, c client.Client, r *gardener.Reconciler, e cloudevents.Event) error {
	var entry extensionsv1alpha1.BackupEntry
	if err := json.Unmarshal(e.Data(), &entry); err != nil || entry.Spec.BucketName == "" {
		return runtime.Permanentf("%s event without a BackupEntry snapshot naming its bucket", e.Type())
	}
	b := &extensionsv1alpha1.BackupBucket{}
	if err := c.Get(ctx, client.ObjectKey{Name: entry.Spec.BucketName}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading BackupBucket %s: %w", entry.Spec.BucketName, err)
	}
	if b.DeletionTimestamp == nil {
		return nil
	}
	return r.Reconcile(ctx, b)
}
