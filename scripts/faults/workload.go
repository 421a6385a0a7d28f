package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// provokedID marks the one invalid event the workload publishes on purpose. Replaying the
// stream re-drives it, and each re-drive is dead-lettered again — as it should be.
const provokedID = "provoked-by-the-fault-suite"

// workload creates, changes and deletes buckets and entries, and remembers what the end state
// must be.
type workload struct {
	r         *rig
	watch     *purgeWatch
	providers objectstore.Registry
	// rand is the workload's own: the fault injector draws from another in parallel.
	rand *rand.Rand

	mu sync.Mutex
	// buckets by name: provider type and the credentials in their secret.
	buckets map[string]bucketInfo
	// live entries by name, with their uid and the blobs written under them.
	live map[string]entryInfo
	// gone entries by name: deleted, not re-created; their prefix must be empty.
	gone map[string]entryInfo
	// keep lists every blob that must survive, by bucket.
	keep map[string][]string
	// canaries are secret values that must appear in no log.
	canaries  []string
	updates   int
	deleted   int
	recreated int
	// deletions in the order they were sent; the purge watch follows them.
	deletions []deletion
	// reserve are live entries kept for the outages: deleted just before and during each, never
	// updated or deleted by the workload itself; updatable are the entries the workload updates.
	reserve, updatable []string
	// ready is closed once every entry has its backups written (and reserve is drawn).
	ready chan struct{}
}

// outageReserve is how many entries the outages delete: four for each, for two rounds.
const outageReserve = 4 * 3 * 2

// deletion is one entry's deletion as the workload sent it, timed by the workload's own
// clock.
type deletion struct {
	name, bucket string
	// uid is the deleted object's: a re-created entry of the same name is another.
	uid string
	// keys are the blobs written under the entry's prefix, which must stay until due.
	keys []string
	// sent is when the delete was first sent, before any retry; accepted when it succeeded.
	sent, accepted time.Time
	// due is the earliest time the purge may run: when the delete was sent, rounded down to
	// the second as the deletion timestamp is, plus the retention; never later than the due
	// time housekeeper computes from the deletion timestamp.
	due time.Time
}

type bucketInfo struct {
	typ         string
	credentials map[string][]byte
}

type entryInfo struct {
	uid, bucket string
	// keys are the blobs written under its prefix.
	keys []string
}

func newWorkload(r *rig) *workload {
	return &workload{
		r:         r,
		providers: objectstore.NewRegistry(azure.New(), local.New(r.localRoot)),
		rand:      newRand(r.cfg, 7),
		buckets:   map[string]bucketInfo{},
		live:      map[string]entryInfo{},
		gone:      map[string]entryInfo{},
		keep:      map[string][]string{},
		ready:     make(chan struct{}),
	}
}

// retry repeats a call through the faults (a restarting API server, an object store down for an
// outage).
func (w *workload) retry(ctx context.Context, what string, call func() error) error {
	deadline := time.Now().Add(2*time.Minute + w.r.cfg.Outage)
	for {
		err := call()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (w *workload) create(ctx context.Context, obj client.Object) error {
	return w.retry(ctx, "creating "+obj.GetName(), func() error {
		err := w.r.client.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			return w.r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		return err
	})
}

func (w *workload) run(ctx context.Context) error {
	cfg := w.r.cfg
	if err := w.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}); err != nil {
		return err
	}
	for i := range cfg.Buckets {
		if err := w.createBucket(ctx, i); err != nil {
			return err
		}
	}
	names := make([]string, cfg.Entries)
	for i := range cfg.Entries {
		names[i] = fmt.Sprintf("shoot--p%d--s%03d--%08x", i%7, i, w.rand.Uint32())
		// One in ten shoots gets its namespace only after its entry.
		if err := w.createEntry(ctx, names[i], fmt.Sprintf("bucket-%02d", i%cfg.Buckets), i%10 != 0); err != nil {
			return err
		}
	}
	for i, name := range names {
		if i%10 == 0 {
			if err := w.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardener.EntryNamespace(name)}}); err != nil {
				return err
			}
		}
	}
	if err := w.provokeDeadLetter(ctx); err != nil {
		return err
	}
	if err := w.forEach(ctx, names, w.writeBackups); err != nil {
		return err
	}
	// Spread updates and deletions over the fault period.
	order := w.rand.Perm(len(names))
	toDelete := order[:cfg.Deletions]
	reserve := min(outageReserve, len(names)-cfg.Deletions-1)
	updatable := order[cfg.Deletions : len(names)-reserve]
	w.mu.Lock()
	for _, i := range order[len(names)-reserve:] {
		w.reserve = append(w.reserve, names[i])
	}
	for _, i := range updatable {
		w.updatable = append(w.updatable, names[i])
	}
	w.mu.Unlock()
	close(w.ready)
	pause := cfg.FaultPeriod / time.Duration(2*(cfg.Deletions+cfg.Updates)+1)
	for range cfg.Updates {
		if err := w.update(ctx, names[updatable[w.rand.IntN(len(updatable))]]); err != nil {
			return err
		}
		time.Sleep(pause)
	}
	var recreations sync.WaitGroup
	errs := make(chan error, cfg.Recreations)
	for i, idx := range toDelete {
		retention := time.Duration(w.rand.Int64N(int64(cfg.MaxRetention) + 1)).Truncate(time.Second)
		if err := w.delete(ctx, names[idx], retention, i%8 == 0); err != nil {
			return err
		}
		if i < cfg.Recreations {
			name := names[idx]
			recreations.Go(func() { errs <- w.recreate(ctx, name) })
		}
		time.Sleep(pause)
	}
	recreations.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *workload) createBucket(ctx context.Context, i int) error {
	name := fmt.Sprintf("bucket-%02d", i)
	canary := fmt.Sprintf("canary-%016x", w.rand.Uint64())
	info := bucketInfo{typ: "local", credentials: map[string][]byte{"canary": []byte(canary)}}
	if i%2 == 0 {
		info = bucketInfo{typ: "azure", credentials: map[string][]byte{
			azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
			azure.KeyStorageKey:     []byte(stack.AzuriteKey),
			azure.KeyEndpoint:       []byte(w.r.azuriteEndpoint),
			"canary":                []byte(canary),
		}}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", Namespace: "garden"}, Data: info.credentials}
	if err := w.create(ctx, secret); err != nil {
		return err
	}
	b := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: info.typ}, Region: "local",
			SecretRef: corev1.SecretReference{Name: secret.Name, Namespace: "garden"},
		},
	}
	if err := w.create(ctx, b); err != nil {
		return err
	}
	w.mu.Lock()
	w.buckets[name] = info
	w.canaries = append(w.canaries, canary)
	w.mu.Unlock()
	// Objects at the bucket's root belong to nobody's prefix.
	if err := w.put(ctx, name, "root-object"); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keep[name] = append(w.keep[name], "root-object")
	return nil
}

// open opens a bucket of the workload with the credentials of its secret.
func (w *workload) open(bucketName string) (objectstore.Store, error) {
	w.mu.Lock()
	info, ok := w.buckets[bucketName]
	w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("bucket %s is not part of the workload yet", bucketName)
	}
	provider, err := w.providers.Get(info.typ)
	if err != nil {
		return nil, err
	}
	return provider.Open(bucketName, info.credentials)
}

// put writes an object as etcd-backup-restore would; the container is created if needed
// (the bucket function may not have got there yet).
func (w *workload) put(ctx context.Context, bucketName, key string) error {
	store, err := w.open(bucketName)
	if err != nil {
		return err
	}
	return w.retry(ctx, "writing "+bucketName+"/"+key, func() error {
		if err := store.Create(ctx); err != nil {
			return err
		}
		return objectstore.PutBytes(ctx, store, key, []byte("snapshot"))
	})
}

func (w *workload) createEntry(ctx context.Context, name, bucketName string, withNamespace bool) error {
	if withNamespace {
		if err := w.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardener.EntryNamespace(name)}}); err != nil {
			return err
		}
	}
	w.mu.Lock()
	typ := w.buckets[bucketName].typ
	w.mu.Unlock()
	e := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: typ}, BucketName: bucketName, Region: "local",
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
		},
	}
	if err := w.create(ctx, e); err != nil {
		return err
	}
	w.mu.Lock()
	w.live[name] = entryInfo{uid: string(e.UID), bucket: bucketName}
	w.mu.Unlock()
	return nil
}

// writeBackups waits until the entry is Succeeded — etcd-backup-restore can write only once
// its etcd-backup secret exists — and writes snapshots under its prefix.
func (w *workload) writeBackups(ctx context.Context, name string) error {
	w.mu.Lock()
	bucketName := w.live[name].bucket
	w.mu.Unlock()
	deadline := time.Now().Add(5*time.Minute + w.r.cfg.Outage)
	for {
		e := &extensionsv1alpha1.BackupEntry{}
		err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, e)
		if err == nil && e.Status.LastOperation != nil && e.Status.LastOperation.State == gardencorev1beta1.LastOperationStateSucceeded {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("entry %s never became Succeeded, so no backups were written", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	prefix := gardener.EntryPrefix(name)
	keys := []string{
		prefix + "etcd-main/v2/Full-00000000-00000100-1700000000.gz",
		prefix + "etcd-events/v2/Incr-00000101-00000200-1700000100.gz",
	}
	for _, k := range keys {
		if err := w.put(ctx, bucketName, k); err != nil {
			return err
		}
	}
	// A neighbour whose name extends this one's must outlive this entry's purge.
	neighbour := strings.TrimSuffix(prefix, "/") + "0/not-this-entry"
	if err := w.put(ctx, bucketName, neighbour); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keep[bucketName] = append(w.keep[bucketName], keys...)
	w.keep[bucketName] = append(w.keep[bucketName], neighbour)
	info := w.live[name]
	info.keys = keys
	w.live[name] = info
	return nil
}

func (w *workload) update(ctx context.Context, name string) error {
	err := w.retry(ctx, "updating "+name, func() error {
		e := &extensionsv1alpha1.BackupEntry{}
		if err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, e); err != nil {
			return err
		}
		base := e.DeepCopy()
		if w.rand.IntN(2) == 0 {
			e.Spec.Region = fmt.Sprintf("region-%d", w.rand.IntN(5))
		} else {
			metav1.SetMetaDataAnnotation(&e.ObjectMeta, "gardener.cloud/operation", "reconcile")
		}
		return w.r.client.Patch(ctx, e, client.MergeFrom(base))
	})
	if err == nil {
		w.mu.Lock()
		w.updates++
		w.mu.Unlock()
	}
	return err
}

// delete sets a retention (or force-deletion) and deletes the entry; its blobs are no longer
// kept.
func (w *workload) delete(ctx context.Context, name string, retention time.Duration, force bool) error {
	sent := time.Now()
	err := w.retry(ctx, "deleting "+name, func() error {
		e := &extensionsv1alpha1.BackupEntry{}
		if err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, e); err != nil {
			return err
		}
		if e.DeletionTimestamp != nil {
			return nil
		}
		base := e.DeepCopy()
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, entry.AnnotationRetention, retention.String())
		if force {
			metav1.SetMetaDataAnnotation(&e.ObjectMeta, entry.AnnotationForceDeletion, "true")
		}
		if err := w.r.client.Patch(ctx, e, client.MergeFrom(base)); err != nil {
			return err
		}
		return w.r.client.Delete(ctx, e)
	})
	if err != nil {
		return err
	}
	if force {
		retention = 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	info := w.live[name]
	delete(w.live, name)
	w.gone[name] = info
	w.deletions = append(w.deletions, deletion{
		name: name, bucket: info.bucket, uid: info.uid, keys: info.keys, sent: sent, accepted: time.Now(),
		due: sent.Truncate(time.Second).Add(retention),
	})
	prefix := gardener.EntryPrefix(name)
	kept := w.keep[info.bucket][:0]
	for _, k := range w.keep[info.bucket] {
		if !strings.HasPrefix(k, prefix) {
			kept = append(kept, k)
		}
	}
	w.keep[info.bucket] = kept
	w.deleted++
	return nil
}

// deleteReserved deletes the next entry kept for the outages with retention, and says which
// ("" once none is left).
func (w *workload) deleteReserved(ctx context.Context, retention time.Duration) (string, error) {
	w.mu.Lock()
	if len(w.reserve) == 0 {
		w.mu.Unlock()
		return "", nil
	}
	name := w.reserve[0]
	w.reserve = w.reserve[1:]
	w.mu.Unlock()
	return name, w.delete(ctx, name, retention, false)
}

// touch asks for a reconcile of the n-th entry the workload updates (an operation annotation:
// a new event the functions must see through); the workload's random source stays its own.
func (w *workload) touch(ctx context.Context, n int) error {
	w.mu.Lock()
	if len(w.updatable) == 0 {
		w.mu.Unlock()
		return nil
	}
	name := w.updatable[n%len(w.updatable)]
	w.mu.Unlock()
	err := w.retry(ctx, "updating "+name, func() error {
		e := &extensionsv1alpha1.BackupEntry{}
		if err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, e); err != nil {
			return err
		}
		base := e.DeepCopy()
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, "gardener.cloud/operation", "reconcile")
		return w.r.client.Patch(ctx, e, client.MergeFrom(base))
	})
	if err == nil {
		w.mu.Lock()
		w.updates++
		w.mu.Unlock()
	}
	return err
}

// sentDeletions returns the deletions sent so far.
func (w *workload) sentDeletions() []deletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deletions)
}

// nextDue is the earliest due time after t among the deletions sent so far, zero if none.
func (w *workload) nextDue(t time.Time) time.Time {
	var next time.Time
	for _, d := range w.sentDeletions() {
		if d.due.After(t) && (next.IsZero() || d.due.Before(next)) {
			next = d.due
		}
	}
	return next
}

// lastDue is when the last deletion sent so far comes due.
func (w *workload) lastDue() time.Time {
	var last time.Time
	for _, d := range w.sentDeletions() {
		if d.due.After(last) {
			last = d.due
		}
	}
	return last
}

// recreate waits until a deleted entry is gone, then creates it again: same name, new uid.
func (w *workload) recreate(ctx context.Context, name string) error {
	w.mu.Lock()
	info := w.gone[name]
	w.mu.Unlock()
	// The purge watch must see the old prefix empty before new backups land under it.
	deadline := time.Now().Add(w.r.cfg.MaxRetention + 3*time.Minute + w.r.cfg.Outage)
	for {
		err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, &extensionsv1alpha1.BackupEntry{})
		if apierrors.IsNotFound(err) && w.watch.purged(name) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("re-creating %s: the old entry never went away, or its prefix was never seen empty", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.mu.Lock()
	delete(w.gone, name)
	w.mu.Unlock()
	if err := w.createEntry(ctx, name, info.bucket, true); err != nil {
		return err
	}
	if err := w.writeBackups(ctx, name); err != nil {
		return err
	}
	w.mu.Lock()
	w.recreated++
	w.mu.Unlock()
	return nil
}

// forEach calls fn for every name, 16 at a time.
func (w *workload) forEach(ctx context.Context, names []string, fn func(context.Context, string) error) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- fn(ctx, name)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// provokeDeadLetter publishes one event no function can handle.
func (w *workload) provokeDeadLetter(ctx context.Context) error {
	msg := nats.NewMsg("housekeeper.backupentry.created.provoked")
	msg.Header.Set("ce-specversion", "0.3")
	msg.Header.Set("ce-id", provokedID)
	msg.Data = []byte("{not json")
	return w.retry(ctx, "publishing the provoked dead letter", func() error {
		_, err := w.r.js.PublishMsg(ctx, msg)
		return err
	})
}

func (w *workload) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	cfg := w.r.cfg
	return fmt.Sprintf("%d buckets (azure and local), %d entries with blobs, %d updates, %d deleted (retention 0–%s, some forced), %d re-created",
		len(w.buckets), cfg.Entries, w.updates, w.deleted, cfg.MaxRetention, w.recreated)
}
