// A fail-over to a policy's destination and the return from it (spec.failOver). The entry
// function points each entry's etcd-backup at the destination while the policy has failed over
// (BackupCopyPolicy.FailedOver); the copy function records the fail-over, asks every entry's
// reconcile when it starts and when it ends, and on the return copies back to each bucket what
// etcd-backup-restore wrote to the destination meanwhile, before the secrets point back.

package copy

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
)

// failOver carries out p's fail-over, on any event of p while it has failed over: nothing is
// copied to the destination (the buckets are taken for lost). Set, the entries are asked to
// reconcile (their etcd-backup then names the destination) and the status records it; unset,
// the return copies back and, once every entry is back, clears the status and asks the entries
// to reconcile again (their etcd-backup then names their bucket). A return not yet done is an
// error: the event is delivered again, and every fire of the schedule tries too.
func (c *Copier) failOver(ctx context.Context, p *backupv1alpha1.BackupCopyPolicy, log *zap.Logger) error {
	targets, dst, dest, err := c.plan(ctx, p)
	if err != nil {
		return err // an invalid policy is an error here: entries may point at its destination
	}
	key := client.ObjectKeyFromObject(p)
	log = log.With(zap.String("destination", p.Spec.Destination), zap.Int("entries", len(targets)))
	if p.Spec.FailOver {
		if s := p.Status.FailOver; s != nil && s.Phase == backupv1alpha1.FailOverActive {
			return nil // carried out already
		}
		// The entries first: the spec is what points them at the destination, and a crash
		// before the status is written does this again on the event's redelivery.
		if err := c.reconcileEntries(ctx, targets); err != nil {
			return err
		}
		switched := 0
		for _, t := range targets {
			if t.entry.Spec.Type == dest.Spec.Type {
				switched++
			}
		}
		message := fmt.Sprintf("The etcd-backup secrets of %d entries point at BackupDestination %s from their shoots' next reconcile on; unset spec.failOver to return", switched, dest.Name)
		if kept := len(targets) - switched; kept > 0 {
			message += fmt.Sprintf(". %d entries of other provider types than %s keep their buckets (their BackupEntries say so): restore them from the copy by hand", kept, dest.Spec.Type)
		}
		log.Warn("failed over: nothing is copied to the destination until the return", zap.Int("switched", switched))
		since := metav1.NewTime(c.Now().UTC())
		return kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
			if s := p.Status.FailOver; s != nil {
				since = s.Since
			}
			p.Status.FailOver = &backupv1alpha1.FailOverStatus{Since: since, Phase: backupv1alpha1.FailOverActive}
			kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionFailedOver, true, backupv1alpha1.FailOverActive, message)
		})
	}

	if err := kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
		if s := p.Status.FailOver; s != nil {
			s.Phase = backupv1alpha1.FailOverReturning
		}
	}); err != nil {
		return err
	}
	log.Info("returning: copying back what was written to the destination")
	back := c.copyBack(ctx, targets, dst, p.Spec.EffectiveConcurrency(), log)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var objects, bytes int64
	var failed []string
	for i, r := range back {
		if r.Report != nil {
			objects, bytes = objects+int64(r.Report.Copied), bytes+r.Report.CopiedBytes
		}
		if r.Err != nil {
			failed = append(failed, targets[i].entry.Name+": "+r.Err.Error())
		}
	}
	if len(failed) > 0 {
		message := fmt.Sprintf("%d of %d entries are not yet copied back from BackupDestination %s; their etcd-backup secrets keep pointing at it: %s",
			len(failed), len(targets), p.Spec.Destination, first(failed))
		if err := kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
			kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionFailedOver, true, backupv1alpha1.FailOverReturning,
				kube.Truncate(message, backupv1alpha1.MaxCopyReasonLength))
		}); err != nil {
			return err
		}
		return fmt.Errorf("returning from the fail-over: %s", message)
	}
	// The status before the entries: the entry function points them back only once the
	// return is recorded.
	if err := kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
		p.Status.FailOver = nil
		kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionFailedOver, false, backupv1alpha1.FailOverReturned,
			fmt.Sprintf("%d objects (%d bytes) written to BackupDestination %s during the fail-over are copied back; the etcd-backup secrets of %d entries point at their buckets from their shoots' next reconcile on",
				objects, bytes, p.Spec.Destination, len(targets)))
	}); err != nil {
		return err
	}
	log.Info("returned", zap.Int64("objects", objects), zap.Int64("bytes", bytes))
	return c.reconcileEntries(ctx, targets)
}

// copyBack copies each target's prefix from the destination src to the target's bucket, at most
// concurrency entries at once; the results are in the targets' order.
func (c *Copier) copyBack(ctx context.Context, targets []target, src objectstore.Store, concurrency int, log *zap.Logger) []Copied {
	results := make([]Copied, len(targets))
	buckets := &runStores{buckets: gardener.Buckets{Client: c.Client, Providers: c.Providers}}
	eachTarget(ctx, targets, concurrency, func(i int, t target) {
		be := t.entry
		results[i] = Copied{Entry: be.Name, Bucket: be.Spec.BucketName}
		bucket, err := buckets.open(ctx, be)
		if err != nil {
			results[i].Err = fmt.Errorf("opening the bucket %s: %w", be.Spec.BucketName, err)
			return
		}
		results[i].Report, results[i].Err = replica.Copy(ctx, src, bucket, t.prefix,
			replica.WithLogger(log.With(zap.String("entry", be.Name), zap.String("bucket", be.Spec.BucketName))))
	})
	return results
}

// reconcileEntries asks each target's reconcile, as gardenlet does: the annotation
// gardener.cloud/operation: reconcile, which the entry function removes once it has acted.
func (c *Copier) reconcileEntries(ctx context.Context, targets []target) error {
	for _, t := range targets {
		be := t.entry
		if be.Annotations[gardener.AnnotationOperation] == gardener.OperationReconcile {
			continue
		}
		patch := client.MergeFrom(be.DeepCopy())
		metav1.SetMetaDataAnnotation(&be.ObjectMeta, gardener.AnnotationOperation, gardener.OperationReconcile)
		if err := c.Client.Patch(ctx, be, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("asking BackupEntry %s to reconcile: %w", be.Name, err)
		}
	}
	return nil
}
