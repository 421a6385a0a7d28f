package bridge

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

const (
	// byEntryNamespace indexes BackupEntries by the control-plane namespace their secret goes to.
	byEntryNamespace = "entryNamespace"
	// bySecretRef indexes BackupBuckets and BackupEntries by their spec.secretRef.
	bySecretRef = "secretRef"
	// bySecretNamespace indexes handled BackupBuckets and BackupEntries by the namespace of
	// their spec.secretRef.
	bySecretNamespace = "secretNamespace"
)

// Bridge watches BackupBuckets, BackupEntries, Namespaces and the Secrets they reference, and
// housekeeper's EtcdBackupConfigs, RestoreDrills and BackupCopyPolicies, and publishes events.
type Bridge struct {
	opts      Options
	filter    filter
	publisher Publisher
	queue     *queue
	metrics   *metrics
	state     *stateMetrics
	log       *zap.Logger

	buckets, entries, namespaces cache.SharedIndexInformer
	// ownKinds are housekeeper's own kinds, each watched once the API server serves it.
	ownKinds  []*ownKind
	ownSource *ownKindSource
	secrets   *secretWatch
	announced *announced
	// handlersSynced report whether the handlers received the informers' initial lists.
	handlersSynced []cache.InformerSynced

	// term tells this bridge's announcements from an earlier process's or term's; announcements
	// counts those made new to the duplicate window (again).
	term          string
	announcements atomic.Uint64

	synced atomic.Bool
	// running is whether Run runs the informers: their stores are current only then.
	running atomic.Bool
	outage  outage
}

// New creates a bridge reading from the API server at cfg and publishing with p; metrics
// are registered on reg (nil: not registered).
func New(cfg *rest.Config, p Publisher, reg prometheus.Registerer, opts Options) (*Bridge, error) {
	opts.defaults()
	if opts.Cluster == "" {
		return nil, errors.New("bridge: a cluster name is required (it is every event's source)")
	}
	if err := opts.Scope.Validate(); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	rc, err := kube.ExtensionsRESTClient(cfg)
	if err != nil {
		return nil, err
	}
	// Namespaces and secrets are built-in types: watched as protobuf, which decodes at a
	// fraction of JSON's cost (a seed's credentials change with every entry's finalizer).
	// BackupBuckets and BackupEntries are custom resources, served as JSON only: watched
	// with a decoder that reads each event once (jsonListWatch).
	core := rest.CopyConfig(cfg)
	core.ContentType = kruntime.ContentTypeProtobuf
	core.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(core)
	if err != nil {
		return nil, err
	}
	q := newQueue(opts.MaxRetryDelay)
	b := &Bridge{
		opts:      opts,
		filter:    filter{scope: opts.Scope},
		publisher: p,
		queue:     q,
		metrics:   newMetrics(reg, q),
		state:     newStateMetrics(reg),
		log:       opts.Logger,
		term:      strconv.FormatInt(time.Now().UnixNano(), 36),
		announced: newAnnounced(),
	}
	if reg != nil {
		reg.MustRegister(newDrillCollector(b.drillStore))
	}
	b.buckets = cache.NewSharedIndexInformer(
		jsonListWatch(rc, "backupbuckets", func() kruntime.Object { return &extensionsv1alpha1.BackupBucket{} }),
		&extensionsv1alpha1.BackupBucket{}, opts.ResyncPeriod, cache.Indexers{
			bySecretRef:       secretRefIndex,
			bySecretNamespace: b.secretNamespaceIndex,
		})
	b.entries = cache.NewSharedIndexInformer(
		jsonListWatch(rc, "backupentries", func() kruntime.Object { return &extensionsv1alpha1.BackupEntry{} }),
		&extensionsv1alpha1.BackupEntry{}, opts.ResyncPeriod, cache.Indexers{
			byEntryNamespace: func(obj any) ([]string, error) {
				return []string{gardener.EntryNamespace(obj.(client.Object).GetName())}, nil
			},
			bySecretRef:       secretRefIndex,
			bySecretNamespace: b.secretNamespaceIndex,
		})
	b.namespaces = cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "namespaces", "", fields.Everything()),
		&corev1.Namespace{}, 0, cache.Indexers{})
	b.ownKinds = newOwnKinds()
	if b.ownSource, err = newOwnKindSource(cfg, opts.ResyncPeriod); err != nil {
		return nil, err
	}
	b.secrets = &secretWatch{client: cs.CoreV1().RESTClient(), inUse: b.secretNamespaceInUse, handler: b.secretHandler, log: opts.Logger}
	// Trim what the informers cache: managedFields are large and no event carries them.
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		b.buckets:    b.objectHandler(events.KindBackupBucket),
		b.entries:    b.objectHandler(events.KindBackupEntry),
		b.namespaces: cache.ResourceEventHandlerDetailedFuncs{AddFunc: b.namespaceAdded, UpdateFunc: b.namespaceUpdated},
	}
	for _, inf := range b.informers() {
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return nil, err
		}
	}
	for inf, handler := range handlers {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, err
		}
		b.handlersSynced = append(b.handlersSynced, reg.HasSynced)
	}
	// Own kinds served at the start are part of its initial lists; Run waits for the others.
	for _, k := range b.ownKinds {
		served, err := b.ownSource.served(k)
		if err != nil {
			return nil, err
		}
		if !served {
			continue
		}
		synced, err := b.watchOwnKind(k)
		if err != nil {
			return nil, err
		}
		b.handlersSynced = append(b.handlersSynced, synced)
	}
	return b, nil
}

// informers are the object informers the bridge runs (the secrets have their own).
func (b *Bridge) informers() []cache.SharedIndexInformer {
	infs := []cache.SharedIndexInformer{b.buckets, b.entries, b.namespaces}
	for _, k := range b.ownKinds {
		if inf := k.informer(); inf != nil {
			infs = append(infs, inf)
		}
	}
	return infs
}

func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(client.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// Synced reports whether the informers finished their initial list.
func (b *Bridge) Synced() bool { return b.synced.Load() }

// Pending counts the objects whose latest event is not yet acknowledged.
func (b *Bridge) Pending() int { return b.queue.pending() }

// Run watches and publishes until ctx is done, then stops watching and flushes the queue for
// at most FlushTimeout. What is left unpublished is not lost: the next start re-lists every
// object and emits its state.
func (b *Bridge) Run(ctx context.Context) error {
	b.recall(ctx) // before the initial lists, which are compared with it
	b.running.Store(true)
	watchCtx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatching()
	b.secrets.run(watchCtx) // before the object informers, whose handlers start secret informers
	var informers sync.WaitGroup
	for _, inf := range b.informers() {
		informers.Go(func() { inf.RunWithContext(watchCtx) })
	}
	for _, k := range b.ownKinds {
		if k.informer() == nil {
			informers.Go(func() { b.awaitOwnKind(watchCtx, k) })
		}
	}

	publishCtx, stopPublishing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPublishing()
	acks := make(chan inFlight, b.opts.MaxInFlight)
	var dispatchers, publishing sync.WaitGroup

	// Nothing is published before every initial list is in. A function reads the other kinds
	// live when it handles an event, and each informer watches from its own list on: what
	// changed between the first list and the last (an entry deleted after the buckets were
	// listed and before the entries were) is then either in a list or seen by a watch, and
	// the event that would have been handled too early (a bucket waiting for that entry) is
	// handled after it. The secret informers started for the objects of the initial lists are
	// waited for too: a secret created after Synced must be announced, not be part of a list.
	if cache.WaitForCacheSync(ctx.Done(), b.handlersSynced...) && cache.WaitForCacheSync(ctx.Done(), b.secrets.hasSynced) {
		unchanged := b.release()
		b.synced.Store(true)
		b.log.Info("informers synced", zap.Int("buckets", len(b.buckets.GetStore().ListKeys())),
			zap.Int("entries", len(b.entries.GetStore().ListKeys())), zap.Strings("secretNamespaces", b.secrets.watched()),
			zap.Int("queued", b.queue.pending()), zap.Int("unchanged", unchanged))
		// Encoding is most of a dispatcher's work: one per CPU.
		for range runtime.GOMAXPROCS(0) {
			dispatchers.Go(func() { b.dispatch(publishCtx, acks) })
		}
	}
	publishing.Go(func() { dispatchers.Wait(); close(acks) })
	publishing.Go(func() { b.awaitAcks(publishCtx, acks) })
	<-ctx.Done()

	b.running.Store(false)
	stopWatching()
	informers.Wait()
	b.secrets.stop()
	// A lost lease publishes nothing more: another replica may lead by now, and it announces
	// again what this one left.
	if b.Synced() && !errors.Is(context.Cause(ctx), ErrLeaseLost) {
		b.flush()
	}
	stopPublishing()
	b.queue.shutdown()
	publishing.Wait()
	return nil
}

// flush waits until every queued event is acknowledged or FlushTimeout passed.
func (b *Bridge) flush() {
	deadline := time.Now().Add(b.opts.FlushTimeout)
	for b.queue.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := b.queue.pending(); n > 0 {
		b.log.Warn("shutting down with unpublished events; the next start re-emits the objects' state",
			zap.Int("pending", n))
	}
}
