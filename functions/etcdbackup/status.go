package etcdbackup

import (
	"context"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC()) }

// updateStatus applies change to the live config's status and writes it, re-reading on a
// conflict: the schedule and snapshot functions write different parts of it. A config that
// is gone needs no status.
func updateStatus(ctx context.Context, c client.Client, key client.ObjectKey, change func(*backupv1alpha1.EtcdBackupConfig)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &backupv1alpha1.EtcdBackupConfig{}
		if err := c.Get(ctx, key, cfg); err != nil {
			return err
		}
		before := cfg.Status.DeepCopy()
		change(cfg)
		if equalStatus(before, &cfg.Status) {
			return nil
		}
		return c.Status().Update(ctx, cfg)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// equalStatus compares statuses; meta.SetStatusCondition keeps a condition's transition time
// when nothing else changed, so an unchanged outcome writes nothing.
func equalStatus(a, b *backupv1alpha1.EtcdBackupConfigStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// setCondition sets a condition of cfg at its generation.
func setCondition(cfg *backupv1alpha1.EtcdBackupConfig, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&cfg.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(message, 1024), ObservedGeneration: cfg.Generation,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
