package copy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Definition declares the copy function. A run may take long (every selected entry's objects):
// the worker tells JetStream the event is in progress while the handler runs, so only a dead
// worker's run is delivered again.
var Definition = runner.Definition{
	Name: "copy",
	// It reads entries' backups and writes their copy, streaming objects its container's memory
	// bounds.
	Needs: runner.Needs{APIServer: true, Stores: true, OwnResources: true, Feature: "etcdBackupConfig"},
	// Fired schedules; and the policy's object events, for a run on demand (RunNow).
	Types: []string{events.TypeCopyDue,
		events.TypeBackupCopyPolicyCreated, events.TypeBackupCopyPolicyUpdated, events.TypeBackupCopyPolicySynced},
	Bind: runner.NoFlags(func(_ context.Context, d runner.Deps) (runner.Handler, error) {
		return &Copier{Client: d.Client, Providers: d.Stores, Log: d.Log, Metrics: NewMetrics(d.Metrics), Now: time.Now}, nil
	}),
}

// RunNow is the value of the annotation gardener.cloud/operation that asks for a policy's copy
// now, as it asks Gardener's extensions to reconcile: the copy function runs it and removes the
// annotation.
const RunNow = gardener.OperationReconcile

// Copier runs a BackupCopyPolicy's copies once per fire of its schedule, or on demand. It only
// reads the entries' buckets: replica.Copy never writes to its source.
type Copier struct {
	Client    client.Client
	Providers objectstore.Registry
	Log       *zap.Logger
	// Metrics may be nil: no metrics.
	Metrics *Metrics
	Now     func() time.Time
	// ProgressEvery is how often a long entry's copy logs its progress (replica's default
	// when 0).
	ProgressEvery time.Duration
}

// Handle runs the copies of the policy an event names: a copy-due event's fire (once: a fire
// delivered again after its run wrote its status runs nothing), or an object event of a policy
// annotated for a run now. Any other event copies nothing.
func (c *Copier) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return err
	}
	if ref.Kind != events.KindBackupCopyPolicy {
		return runner.Permanentf("the copy function runs BackupCopyPolicies, not a %s", ref.Kind)
	}
	if namespace, _ := events.SplitObjectName(ref.Name); namespace != "" {
		return runner.Permanentf("event names %q, but a BackupCopyPolicy is cluster-scoped: named by its name alone", ref.Name)
	}
	key := client.ObjectKey{Name: ref.Name}
	p := &backupv1alpha1.BackupCopyPolicy{}
	if err := c.Client.Get(ctx, key, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone: its schedule goes with it
		}
		return err
	}
	if p.DeletionTimestamp != nil || (ref.UID != "" && string(p.UID) != ref.UID) {
		return nil // deleting, or a new policy of the same name with a schedule of its own
	}
	onDemand := e.Type() != events.TypeCopyDue
	if p.FailedOver() {
		// Nothing is copied to the destination; its event carries out the fail-over, a run
		// asked for now included.
		if err := c.failOver(ctx, p, c.Log.With(zap.String("backupCopyPolicy", ref.Name))); err != nil {
			return err
		}
		if onDemand {
			return c.done(ctx, p)
		}
		return nil
	}
	var fire runner.Fire
	if onDemand {
		if p.Annotations[gardener.AnnotationOperation] != RunNow {
			return nil // a change of the policy: the schedule function's
		}
		fire = runner.Fire{At: c.Now().UTC().Truncate(time.Second)}
	} else {
		// A run dated ahead would make every run until then look done already: a fire ahead is
		// refused, nothing copied.
		if fire, err = runner.DatedFire(ctx, c.Now(), "copy-due event for "+ref.Name); err != nil {
			return err
		}
		if last := p.Status.LastRun; last != nil && !last.Time.Before(fire.At) {
			return nil // this fire's run, or a later one, wrote its status already
		}
	}
	log := c.Log.With(zap.String("backupCopyPolicy", ref.Name), zap.Time("fire", fire.At), zap.Bool("onDemand", onDemand))
	if err := c.run(ctx, p, fire, log); err != nil {
		return err
	}
	if onDemand {
		return c.done(ctx, p)
	}
	return nil
}

// run copies what p selects and writes its status.
func (c *Copier) run(ctx context.Context, p *backupv1alpha1.BackupCopyPolicy, fire runner.Fire, log *zap.Logger) error {
	key := client.ObjectKeyFromObject(p)
	objective := p.Spec.EffectiveLagObjective()
	targets, dst, _, err := c.plan(ctx, p)
	var invalid *destination.Problem
	switch {
	case errors.As(err, &invalid):
		log.Warn("nothing copied", zap.Error(err))
		return kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
			kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionCopiesSucceeded, false, invalid.Reason, invalid.Message)
			kube.SetNextRun(&p.Status.NextRun, fire.Next)
		})
	case err != nil:
		return err
	}
	run := c.Now().UTC()
	concurrency := p.Spec.EffectiveConcurrency()
	log.Info("copying", zap.Int("entries", len(targets)), zap.Int("concurrency", concurrency), zap.String("destination", p.Spec.Destination))
	prior := map[string]*backupv1alpha1.EntryCopyResult{}
	for i := range p.Status.Results {
		prior[p.Status.Results[i].Entry] = &p.Status.Results[i]
	}
	results := c.copyAll(ctx, p.Name, targets, dst, concurrency, prior, log)
	if ctx.Err() != nil {
		// Shutting down: the run is incomplete; the event goes back to another worker.
		return ctx.Err()
	}
	selected := make([]string, len(targets))
	for i, t := range targets {
		selected[i] = t.entry.Name
		delete(prior, t.entry.Name)
	}
	c.Metrics.forget(p.Name, slices.Collect(maps.Keys(prior))) // no longer selected
	var copied, bytes int64
	for _, r := range results {
		copied, bytes = copied+r.Objects, bytes+r.Bytes
	}
	log.Info("copies done", zap.Int("entries", len(results)), zap.Int64("objects", copied), zap.Int64("bytes", bytes),
		zap.Duration("took", c.Now().Sub(run)))
	// Deleted while it ran, there is no status to write.
	return kube.UpdateStatus(ctx, c.Client, key, newPolicy, func(p *backupv1alpha1.BackupCopyPolicy) {
		Record(&p.Status, run, results, selected, objective)
		ok, reason, message := copiesVerdict(results)
		kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionCopiesSucceeded, ok, reason, message)
		ok, reason, message = lagVerdict(results, objective)
		kube.SetCondition(&p.Status.Conditions, p.Generation, backupv1alpha1.ConditionWithinLagObjective, ok, reason, message)
		kube.SetNextRun(&p.Status.NextRun, fire.Next)
	})
}

// done removes the request for a run now, once its run wrote the status: a redelivery of its
// event finds none and runs nothing. The patch is conditional on the policy's resourceVersion
// as read, so that a request made again meanwhile is kept.
func (c *Copier) done(ctx context.Context, p *backupv1alpha1.BackupCopyPolicy) error {
	live := &backupv1alpha1.BackupCopyPolicy{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.Annotations[gardener.AnnotationOperation] != RunNow {
		return nil
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(live.Annotations, gardener.AnnotationOperation)
	if err := c.Client.Patch(ctx, live, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the %s annotation: %w", gardener.AnnotationOperation, err)
	}
	return nil
}

// target is one entry whose backups are copied.
type target struct {
	entry  *extensionsv1alpha1.BackupEntry
	prefix string
}

// ErrDestinationSelected: the policy's destination is the bucket of a BackupBucket it selects.
var ErrDestinationSelected = errors.New("the copy's destination is a bucket the policy copies from")

// invalidPolicy is a policy that cannot run as it is (a Problem, whatever err is): it becomes a
// False condition and is not retried; the next fire, after a fix, tries again.
func invalidPolicy(err error) *destination.Problem {
	return destination.Invalid(backupv1alpha1.ReasonInvalidPolicy, err)
}

// plan opens p's destination and picks the entries it copies now: those of the selected
// buckets, each under its prefix.
func (c *Copier) plan(ctx context.Context, p *backupv1alpha1.BackupCopyPolicy) ([]target, objectstore.Store, *backupv1alpha1.BackupDestination, error) {
	sel, err := destination.Select(p.Spec.Buckets)
	if err != nil {
		return nil, nil, nil, invalidPolicy(err)
	}
	dst, dest, err := destination.Open(ctx, c.Client, c.Providers, p.Spec.Destination)
	if _, bad := destination.ProblemReason(err); bad {
		return nil, nil, nil, invalidPolicy(err)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening BackupDestination %s: %w", p.Spec.Destination, err)
	}
	buckets := &extensionsv1alpha1.BackupBucketList{}
	if err := c.Client.List(ctx, buckets); err != nil {
		return nil, nil, nil, fmt.Errorf("listing BackupBuckets: %w", err)
	}
	selected := map[string]bool{}
	for i := range buckets.Items {
		b := &buckets.Items[i]
		if !sel.SelectsBucket(b) {
			continue
		}
		// The first store is only read: a copy into a selected bucket would write to it.
		if b.Spec.Type == dest.Spec.Type && b.Name == dest.Spec.Bucket {
			return nil, nil, nil, invalidPolicy(fmt.Errorf("%w: BackupDestination %s is the bucket of the selected BackupBucket %s", ErrDestinationSelected, dest.Name, b.Name))
		}
		selected[b.Name] = true
	}
	if len(selected) == 0 {
		return nil, dst, dest, nil
	}
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := c.Client.List(ctx, entries); err != nil {
		return nil, nil, nil, fmt.Errorf("listing BackupEntries: %w", err)
	}
	var targets []target
	for i := range entries.Items {
		if be := &entries.Items[i]; selected[be.Spec.BucketName] && destination.SelectsEntry(be) {
			targets = append(targets, target{entry: be, prefix: gardener.EntryPrefix(be.Name)})
		}
	}
	return targets, dst, dest, nil
}

// copyAll copies targets to dst, at most concurrency entries at once, and returns their results
// in the targets' order.
func (c *Copier) copyAll(ctx context.Context, policy string, targets []target, dst objectstore.Store, concurrency int,
	prior map[string]*backupv1alpha1.EntryCopyResult, log *zap.Logger) []backupv1alpha1.EntryCopyResult {
	results := make([]backupv1alpha1.EntryCopyResult, len(targets))
	sources := &runStores{buckets: gardener.Buckets{Client: c.Client, Providers: c.Providers}}
	eachTarget(ctx, targets, concurrency, func(i int, t target) {
		copied := c.copyOne(ctx, t, sources, dst, log)
		results[i] = Report(copied, prior[t.entry.Name])
		c.Metrics.observe(policy, copied, results[i])
	})
	return results
}

// eachTarget calls do for each target, at most concurrency at once, and returns when all are
// done; once ctx ends, no further target is started.
func eachTarget(ctx context.Context, targets []target, concurrency int, do func(i int, t target)) {
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		slots <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			do(i, t)
		})
	}
	wg.Wait()
}

// copyOne copies one entry's prefix from its bucket to dst.
func (c *Copier) copyOne(ctx context.Context, t target, sources *runStores, dst objectstore.Store, log *zap.Logger) Copied {
	be := t.entry
	copied := Copied{Entry: be.Name, Bucket: be.Spec.BucketName, Created: be.CreationTimestamp.Time, Start: c.Now().UTC()}
	log = log.With(zap.String("entry", be.Name), zap.String("bucket", be.Spec.BucketName))
	src, err := sources.open(ctx, be)
	if err != nil {
		copied.Err = fmt.Errorf("opening the bucket %s: %w", be.Spec.BucketName, err)
		log.Warn("entry not copied", zap.Error(copied.Err))
		return copied
	}
	opts := []replica.Option{replica.WithLogger(log)}
	if c.ProgressEvery > 0 {
		opts = append(opts, replica.WithProgressEvery(c.ProgressEvery))
	}
	copied.Report, copied.Err = replica.Copy(ctx, src, dst, t.prefix, opts...)
	return copied
}

// runStores opens each bucket once per run, however many of its entries are copied.
type runStores struct {
	buckets gardener.Buckets
	mu      sync.Mutex
	opened  map[string]*openedStore
}

type openedStore struct {
	once  sync.Once
	store objectstore.Store
	err   error
}

// open opens be's bucket as the purge does (gardener.Buckets), once per bucket.
func (s *runStores) open(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Store, error) {
	s.mu.Lock()
	if s.opened == nil {
		s.opened = map[string]*openedStore{}
	}
	o, ok := s.opened[be.Spec.BucketName]
	if !ok {
		o = &openedStore{}
		s.opened[be.Spec.BucketName] = o
	}
	s.mu.Unlock()
	o.once.Do(func() { o.store, o.err = s.buckets.Open(ctx, be) })
	return o.store, o.err
}

func newPolicy() *backupv1alpha1.BackupCopyPolicy { return &backupv1alpha1.BackupCopyPolicy{} }
