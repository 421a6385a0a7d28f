// The purge function: when the NATS server fires a deleted BackupEntry's scheduled purge, it
// re-checks the entry, deletes every object under the entry's prefix — and never one outside
// it — in the BackupDestinations that hold copies of it (copies.go), then in its bucket with
// the bucket's credentials, then releases the entry.

package entry

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Purger deletes the backups of entries whose retention ended.
type Purger struct {
	Client    client.Client
	Providers objectstore.Registry
	Retention Retention
	// Scope is what the installation serves: an entry of another type or class is never purged.
	Scope gardener.Scope
	// Entries writes BackupEntries as the Gardener protocol does: progress, errors, and
	// releasing the finalizers once the backups are gone.
	Entries   gardener.StatusWriter[*extensionsv1alpha1.BackupEntry]
	JetStream jetstream.JetStream
	Cluster   string
	Log       *zap.Logger
	Now       func() time.Time
	// ProgressInterval spaces the status writes of a long purge.
	ProgressInterval time.Duration
	// KeyRetries is how often keys that failed to delete are tried again within one run.
	KeyRetries int
	// Verified counts the outcomes of verify purges; nil counts nothing.
	Verified *VerifyMetrics
	// Copies counts the purges of entries' copies (purgeCopies); nil counts nothing.
	Copies *CopyMetrics
	// Policies, if set, is the cache purgeCopies reads BackupCopyPolicies and BackupBuckets
	// from (CopiesCacheOptions), before the API server, as Actuator.Policies. Its lag (a
	// watch's delay) errs only under the entry's prefix: a policy deleted in that moment has
	// the entry's backups, which are due, purged from its destination; one created in it has
	// copied nothing yet.
	Policies client.Reader

	stores openStores
}

// PurgeDefinition declares the purge function. It shares the entry function's retention flags.
var PurgeDefinition = runner.Definition{
	Name:  "purge",
	Needs: runner.Needs{APIServer: true, Stores: true},
	// The purges the NATS server fires when due, and the verify purges of what object lock kept.
	Types: []string{events.TypePurgeDue, events.TypePurgeVerify},
	// The verify purges it schedules, and the outcome of each purge.
	Publishes: append([]string{events.SubjectPurgeSchedules}, events.SubjectFilters(events.TypePurgeCompleted, events.TypePurgeFailed, events.TypePurgeVerified)...),
	Bind: func(fs *flag.FlagSet) runner.Constructor {
		retention := BindRetention(fs)
		scope := gardener.BindScope(fs)
		return func(ctx context.Context, d runner.Deps) (runner.Handler, error) {
			s, err := scope(d.Stores)
			if err != nil {
				return nil, err
			}
			p := newPurger(d.Client, d.JetStream, d.Stores, *retention, s, d.Cluster, d.Log)
			p.Verified = NewVerifyMetrics(d.Metrics)
			p.Copies = NewCopyMetrics(d.Metrics)
			if d.Config != nil {
				p.Policies = kube.StartCache(ctx, d.Config, CopiesCacheOptions(), d.FirstEventSettled, d.Log)
			}
			return p, nil
		}
	},
}

// newPurger returns a Purger with the settings the purge and the entry function share.
func newPurger(c client.Client, js jetstream.JetStream, providers objectstore.Registry, retention Retention, scope gardener.Scope, cluster string, log *zap.Logger) *Purger {
	return &Purger{
		Client: c, Providers: providers, Retention: retention, Scope: scope, JetStream: js, Cluster: cluster, Log: log,
		Entries:          StatusWriter(c, log),
		Now:              time.Now,
		ProgressInterval: 2 * time.Second,
		KeyRetries:       3,
	}
}

// Handle runs a due purge after checking the live entry: it must exist, be the same object
// (uid), be deleting, still hold our finalizer, and be due.
func (p *Purger) Handle(ctx context.Context, e cloudevents.Event) error {
	var data events.PurgeData
	if err := json.Unmarshal(e.Data(), &data); err != nil || data.Entry == "" || data.UID == "" {
		return runner.Permanentf("%s event without the entry's name and uid in its data", e.Type())
	}
	log := p.Log.With(zap.String("entry", data.Entry), zap.String("uid", data.UID))
	if e.Type() == events.TypePurgeVerify {
		// No entry is left to record a failure in: the runner alone hears of it.
		return gardener.Classify(p.verify(ctx, log, data))
	}
	be := &extensionsv1alpha1.BackupEntry{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: data.Entry}, be); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("not purging: the entry is gone")
			return nil
		}
		return fmt.Errorf("reading BackupEntry %s: %w", data.Entry, err)
	}
	if why := p.whyNot(be, data.UID); why != "" {
		log.Info("not purging: " + why)
		return nil
	}
	due, err := p.Retention.Due(be)
	if err != nil {
		return p.Entries.Fail(ctx, be, gardencorev1beta1.LastOperationTypeDelete, gardener.Permanent(err, gardencorev1beta1.ErrorConfigurationProblem))
	}
	if now := p.Now(); now.Before(due) {
		log.Info("not purging yet: the retention was extended; the entry function schedules the new time", zap.Time("due", due))
		return nil
	}

	done, err := p.purgeDue(ctx, log, be, data)
	if errors.Is(err, gardener.ErrObjectChanged) {
		// The retry reads the live entry again and finds it released, or a namesake.
		log.Info("purge stopped: " + err.Error())
		return err
	}
	if err != nil {
		err = p.Entries.Fail(ctx, be, gardencorev1beta1.LastOperationTypeDelete, err)
		if runner.ClassOf(err) == runner.ClassPermanent {
			data.Reason = err.Error()
			p.announce(ctx, log, events.OpPurgeFailed, be, data)
		}
		return err
	}
	if err := p.Entries.Release(ctx, be); err != nil {
		return err
	}
	if done != nil {
		p.announce(ctx, log, events.OpPurgeCompleted, be, *done)
	}
	return nil
}

// whyNot says why the live entry be is not for a purge scheduled for the entry of uid to
// delete from ("" when it is): it must be the same object, this installation's, deleting,
// still hold our finalizer, and not have migrated.
func (p *Purger) whyNot(be *extensionsv1alpha1.BackupEntry, uid string) string {
	switch {
	case string(be.UID) != uid:
		return fmt.Sprintf("the entry was re-created since this purge was scheduled (live uid %s)", be.UID)
	case !p.Scope.Serves(be):
		return fmt.Sprintf("the entry's type (%s) or class is not this installation's", be.Spec.Type)
	case be.DeletionTimestamp == nil:
		return "the entry is not being deleted"
	case !controllerutil.ContainsFinalizer(be, Finalizer):
		return "the entry was already released"
	case gardener.IsMigrated(be):
		return "the entry migrated to another seed, which owns its backups"
	}
	return ""
}

// recheck returns DeleteOptions.Recheck for a purge of be's prefix: it reads the entry again
// and stops the purge (gardener.ErrObjectChanged) unless whyNot still finds nothing. A page
// listed after another worker purged and released be, and a namesake wrote its first backups
// under the same prefix, holds the namesake's backups; and a store's own retries can hold a
// listing back for seconds.
func (p *Purger) recheck(be *extensionsv1alpha1.BackupEntry) func(context.Context) error {
	return func(ctx context.Context) error {
		live := &extensionsv1alpha1.BackupEntry{}
		if err := p.Client.Get(ctx, client.ObjectKeyFromObject(be), live); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%w: BackupEntry %s is gone, released by another worker", gardener.ErrObjectChanged, be.Name)
			}
			return fmt.Errorf("reading BackupEntry %s again before deleting its backups: %w", be.Name, err)
		}
		if why := p.whyNot(live, string(be.UID)); why != "" {
			return fmt.Errorf("%w: BackupEntry %s: %s", gardener.ErrObjectChanged, be.Name, why)
		}
		return nil
	}
}

// purgeDue deletes the backups of be, a live entry checked as Handle checks it: deleting, with
// our finalizer, this installation's, not migrated, and due: their copies in BackupDestinations
// (purgeCopies), then the bucket's. It leaves the release of be to
// its caller, and returns what the purge-completed event says (nil: nothing was purged, the
// prefix being a live entry's). The purge function calls it when a scheduled purge fires; the
// entry function when the entry it has just read is due already (Actuator.Delete).
func (p *Purger) purgeDue(ctx context.Context, log *zap.Logger, be *extensionsv1alpha1.BackupEntry, data events.PurgeData) (*events.PurgeData, error) {
	prefix := gardener.EntryPrefix(be.Name)
	if live, err := p.liveOwner(ctx, be); err != nil {
		return nil, err
	} else if live != "" {
		log.Info("not purging: the prefix belongs to a live entry in the same bucket; releasing", zap.String("liveEntry", live))
		return nil, nil
	}
	// The copies first: the bucket stays whole until none is left (purgeCopies).
	copied, lockedCopies, err := p.purgeCopies(ctx, log, be, prefix)
	if err != nil {
		return nil, err
	}
	purged, err := p.purge(ctx, log, be, prefix)
	if err != nil {
		return nil, err
	}
	all := purged.add(copied)
	data.Deleted, data.Locked, data.LockedUntil, data.LockedCopies = all.Deleted, all.Locked, all.Until, lockedCopies
	if all.Locked > 0 {
		// What object lock keeps is marked; the entry is released, as upstream does, so that
		// gardenlet (and a migration) proceeds, and a verify purge is due when the locks end.
		if err := p.scheduleVerify(ctx, log, be, data, all); err != nil {
			return nil, err
		}
	}
	log.Info("purge completed", zap.String("prefix", prefix), zap.Int("deleted", all.Deleted), zap.Int("locked", all.Locked),
		zap.Time("lockedUntil", all.Until), zap.Strings("lockedCopies", lockedCopies))
	return &data, nil
}

// scheduleVerify schedules the verify purge of the objects a purge left locked, in the bucket
// and in the copies data.LockedCopies, at the end of their locks. A legal hold has no end: then
// nothing is scheduled, and the log says so.
func (p *Purger) scheduleVerify(ctx context.Context, log *zap.Logger, be *extensionsv1alpha1.BackupEntry, data events.PurgeData, locked Purged) error {
	if locked.Until.IsZero() {
		log.Warn("objects under the prefix are held without an end (legal hold): no verify purge is scheduled; they are marked for deletion",
			zap.Int("locked", locked.Locked), zap.Strings("lockedCopies", data.LockedCopies), zap.String("note", locked.Note))
		return nil
	}
	data.Locked, data.LockedUntil = locked.Locked, locked.Until
	at := locked.Until.Add(time.Second) // the lock ends at Until: delete just after
	if err := publishPurge(ctx, p.JetStream, p.Cluster, events.OpPurgeVerify, be, data, at, p.Now()); err != nil {
		return err
	}
	log.Info("objects stay locked: marked for deletion, verify purge scheduled", zap.Int("locked", locked.Locked),
		zap.Strings("lockedCopies", data.LockedCopies), zap.Time("lockedUntil", locked.Until), zap.String("note", locked.Note))
	return nil
}

// verify is the follow-up purge of a released entry whose objects object lock kept: it deletes
// what is under the entry's prefix and marked for deletion (by the purge, or upstream), in the
// bucket and in the copies data.LockedCopies, and nothing else, whoever published the event: a
// forged one can only hasten what the lifecycle rule does anyway. What is still locked is
// marked again and verified later.
func (p *Purger) verify(ctx context.Context, log *zap.Logger, data events.PurgeData) error {
	if data.BucketName == "" || data.Prefix != gardener.EntryPrefix(data.Entry) {
		return runner.Permanentf("verify purge of %s: prefix %q is not the entry's (%q), or no bucket", data.Entry, data.Prefix, gardener.EntryPrefix(data.Entry))
	}
	be := &extensionsv1alpha1.BackupEntry{}
	switch err := p.Client.Get(ctx, client.ObjectKey{Name: data.Entry}, be); {
	case err == nil && be.DeletionTimestamp == nil:
		log.Info("not verifying: an entry of that name is live and owns the prefix")
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading BackupEntry %s: %w", data.Entry, err)
	}
	ref := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: data.Entry, UID: types.UID(data.UID)},
		Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: data.BucketName}}
	bucket := &extensionsv1alpha1.BackupBucket{}
	var purged Purged
	var unmarked int
	switch err := p.Client.Get(ctx, client.ObjectKey{Name: data.BucketName}, bucket); {
	case apierrors.IsNotFound(err) && len(data.LockedCopies) == 0:
		p.notVerifiable(ctx, log, data)
		return nil
	case apierrors.IsNotFound(err):
		data.Reason = notVerifiableReason(data)
		log.Info("not verifying the bucket: " + data.Reason)
	case err != nil:
		return fmt.Errorf("reading BackupBucket %s: %w", data.BucketName, err)
	case !p.Scope.Serves(bucket):
		log.Info("not verifying: the bucket's type or class is not this installation's", zap.String("type", bucket.Spec.Type))
		return nil
	default:
		store, err := gardener.Buckets{Client: p.Client, Providers: p.Providers}.OpenWith(ctx, ref, bucket)
		if err != nil {
			return err
		}
		if locking, ok := store.(objectstore.Locking); ok {
			if purged, unmarked, err = deleteMarked(ctx, store, locking, data.Prefix, p.KeyRetries); err != nil {
				return err
			}
		} else if len(data.LockedCopies) == 0 {
			log.Info("not verifying: the store has no object lock", zap.String("bucket", data.BucketName))
			return nil
		}
	}
	copied, copiesUnmarked, lockedCopies, err := p.verifyCopies(ctx, log, data)
	if err != nil {
		return err
	}
	data.LockedCopies = lockedCopies
	return p.verified(ctx, log, ref, data, purged.add(copied), unmarked+copiesUnmarked)
}

// notVerifiable reports a verify purge whose bucket has no BackupBucket here: gone, or another
// seed's (a migration's source- entry). The objects stay marked for the store's lifecycle rule,
// and the verified event says so.
func (p *Purger) notVerifiable(ctx context.Context, log *zap.Logger, data events.PurgeData) {
	data.Reason = notVerifiableReason(data)
	log.Info("not verifying: " + data.Reason)
	p.Verified.observe(VerifiedNotVerifiable, 0, 0, 0)
	ref := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: data.Entry, UID: types.UID(data.UID)}}
	p.announce(ctx, log, events.OpPurgeVerified, ref, data)
}

func notVerifiableReason(data events.PurgeData) string {
	return fmt.Sprintf("bucket %s has no BackupBucket on this seed: its marked objects are left to the store's lifecycle rule", data.BucketName)
}

// verified reports what a verify purge did to the entry ref's prefix, in the bucket and the
// copies: what is still locked is verified again when its locks end, and the objects without a
// mark, left alone, are told.
func (p *Purger) verified(ctx context.Context, log *zap.Logger, ref *extensionsv1alpha1.BackupEntry, data events.PurgeData, purged Purged, unmarked int) error {
	data.Deleted, data.Locked, data.LockedUntil = purged.Deleted, purged.Locked, purged.Until
	if purged.Locked > 0 {
		if err := p.scheduleVerify(ctx, log, ref, data, purged); err != nil {
			return err
		}
		p.Verified.observe(VerifiedStillLocked, purged.Deleted, purged.Locked, unmarked)
		log.Info("verify purge: objects still locked", zap.String("prefix", data.Prefix), zap.Int("deleted", purged.Deleted),
			zap.Int("locked", purged.Locked), zap.Time("until", purged.Until))
	} else {
		log.Info("verify purge: the prefix holds no marked object any more", zap.String("prefix", data.Prefix), zap.Int("deleted", purged.Deleted),
			zap.Int("unmarked", unmarked), zap.Time("at", p.Now()))
		p.Verified.observe(VerifiedEmpty, purged.Deleted, 0, unmarked)
	}
	if unmarked > 0 {
		left := fmt.Sprintf("%d objects under the prefix carry no mark for deletion and were left alone", unmarked)
		if data.Reason != "" {
			left = data.Reason + "; " + left
		}
		data.Reason = left
	}
	p.announce(ctx, log, events.OpPurgeVerified, ref, data)
	return nil
}

// purge deletes everything under the entry's prefix with the bucket's credentials,
// recording progress in the entry's status.
func (p *Purger) purge(ctx context.Context, log *zap.Logger, be *extensionsv1alpha1.BackupEntry, prefix string) (Purged, error) {
	store, err := p.open(ctx, be)
	if err != nil {
		return Purged{}, err
	}
	lastReport := time.Now()
	progress := func(deleted, total int) {
		if deleted == 0 {
			log.Info("purging", zap.String("prefix", prefix), zap.Int("objects", total))
			return
		}
		if time.Since(lastReport) < p.ProgressInterval {
			return
		}
		lastReport = time.Now()
		log.Info("purge progress", zap.Int("deleted", deleted), zap.Int("of", total))
		progress := int32(1 + 98*deleted/max(total, 1))
		description := fmt.Sprintf("Purging %s: %d of %d objects deleted", prefix, deleted, total)
		if err := p.Entries.Progress(ctx, be, gardencorev1beta1.LastOperationTypeDelete, progress, description); err != nil {
			log.Warn("cannot record progress", zap.Error(err))
		}
	}
	deleted, err := DeletePrefix(ctx, store, prefix, DeleteOptions{Retries: p.KeyRetries, Progress: progress, Recheck: p.recheck(be)})
	if err != nil {
		p.stores.forget(be.Spec.BucketName)
	}
	return deleted, err
}

// liveOwner returns the name of a live entry whose backups share the prefix and bucket of
// the source- entry be ("" for none, and for entries that are not source- entries). A
// migration's source entry normally names the source seed's bucket; were it this seed's, a
// purge would delete the migrated shoot's live backups.
func (p *Purger) liveOwner(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (string, error) {
	if !gardener.IsSourceEntry(be.Name) {
		return "", nil
	}
	name := strings.TrimPrefix(be.Name, gardener.SourcePrefix)
	live := &extensionsv1alpha1.BackupEntry{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading BackupEntry %s: %w", name, err)
	}
	if live.DeletionTimestamp != nil || live.Spec.BucketName != be.Spec.BucketName {
		return "", nil
	}
	return name, nil
}

// announce publishes the purge event op about be, a report of what was done (the audit
// stream's): the report lost, the work is not, so a failure is only logged.
func (p *Purger) announce(ctx context.Context, log *zap.Logger, op events.Operation, be *extensionsv1alpha1.BackupEntry, data events.PurgeData) {
	if err := publishPurge(ctx, p.JetStream, p.Cluster, op, be, data, time.Time{}, p.Now()); err != nil {
		// The entry's status and the log say what happened.
		log.Warn("cannot publish purge event", zap.String("operation", string(op)), zap.Error(err))
	}
}
