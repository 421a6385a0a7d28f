package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
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
)

// Bridge watches BackupBuckets, BackupEntries and Namespaces and publishes events.
type Bridge struct {
	opts      Options
	filter    filter
	publisher Publisher
	queue     *queue
	metrics   *metrics
	log       *zap.Logger

	buckets, entries, namespaces, secrets cache.SharedIndexInformer

	synced   atomic.Bool
	inFlight sync.WaitGroup
}

// New creates a bridge reading from the API server at cfg and publishing with p; metrics
// are registered on reg (nil: not registered).
func New(cfg *rest.Config, p Publisher, reg prometheus.Registerer, opts Options) (*Bridge, error) {
	opts.defaults()
	if opts.Cluster == "" {
		return nil, errors.New("bridge: a cluster name is required (it is every event's source)")
	}
	rc, err := kube.ExtensionsRESTClient(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	q := newQueue(opts.MaxRetryDelay)
	b := &Bridge{
		opts:      opts,
		filter:    filter{types: opts.Types, classes: opts.Classes},
		publisher: p,
		queue:     q,
		metrics:   newMetrics(reg, q),
		log:       opts.Logger,
	}
	b.buckets = cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(rc, "backupbuckets", "", fields.Everything()),
		&extensionsv1alpha1.BackupBucket{}, opts.ResyncPeriod, cache.Indexers{bySecretRef: secretRefIndex})
	b.entries = cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(rc, "backupentries", "", fields.Everything()),
		&extensionsv1alpha1.BackupEntry{}, opts.ResyncPeriod, cache.Indexers{
			byEntryNamespace: func(obj any) ([]string, error) {
				return []string{gardener.EntryNamespace(obj.(client.Object).GetName())}, nil
			},
			bySecretRef: secretRefIndex,
		})
	b.namespaces = cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "namespaces", "", fields.Everything()),
		&corev1.Namespace{}, 0, cache.Indexers{})
	b.secrets = cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "secrets", "", fields.Everything()),
		&corev1.Secret{}, 0, cache.Indexers{})
	// Trim what the informers cache: managedFields are large and no event carries them;
	// secret values are never kept, only a digest to notice that they changed.
	for _, inf := range []cache.SharedIndexInformer{b.buckets, b.entries, b.namespaces} {
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return nil, err
		}
	}
	if err := b.secrets.SetTransform(digestSecret); err != nil {
		return nil, err
	}
	for kind, inf := range map[events.Kind]cache.SharedIndexInformer{events.KindBackupBucket: b.buckets, events.KindBackupEntry: b.entries} {
		if _, err := inf.AddEventHandler(b.objectHandler(kind)); err != nil {
			return nil, err
		}
	}
	if _, err := b.namespaces.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: b.namespaceAdded, UpdateFunc: b.namespaceUpdated}); err != nil {
		return nil, err
	}
	if _, err := b.secrets.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{AddFunc: b.secretAdded, UpdateFunc: b.secretUpdated}); err != nil {
		return nil, err
	}
	return b, nil
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
	stop := make(chan struct{})
	var informers sync.WaitGroup
	for _, inf := range []cache.SharedIndexInformer{b.buckets, b.entries, b.namespaces, b.secrets} {
		informers.Go(func() { inf.Run(stop) })
	}

	publishCtx, cancelPublish := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPublish()
	var workers sync.WaitGroup
	for range b.opts.Workers {
		workers.Go(func() { b.work(publishCtx) })
	}

	if cache.WaitForCacheSync(ctx.Done(), b.buckets.HasSynced, b.entries.HasSynced, b.namespaces.HasSynced, b.secrets.HasSynced) {
		b.synced.Store(true)
		b.log.Info("informers synced", zap.Int("buckets", len(b.buckets.GetStore().ListKeys())),
			zap.Int("entries", len(b.entries.GetStore().ListKeys())))
	}
	<-ctx.Done()

	close(stop)
	informers.Wait()
	b.flush()
	b.queue.shutdown()
	cancelPublish()
	workers.Wait()
	return nil
}

// flush waits until the queue is empty or FlushTimeout passed.
func (b *Bridge) flush() {
	deadline := time.Now().Add(b.opts.FlushTimeout)
	for b.queue.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.inFlight.Wait()
	if n := b.queue.pending(); n > 0 {
		b.log.Warn("shutting down with unpublished events; the next start re-emits the objects' state",
			zap.Int("pending", n))
	}
}

func (b *Bridge) work(ctx context.Context) {
	for {
		key, e, ok := b.queue.next()
		if !ok {
			return
		}
		b.inFlight.Add(1)
		err := b.publish(ctx, e)
		b.queue.done(key, e, err != nil)
		b.inFlight.Done()
	}
}

func (b *Bridge) publish(ctx context.Context, e cloudevents.Event) error {
	msg, err := events.Encode(e)
	if err != nil {
		// Our own event failed our own contract: a bug, not a transient fault. Retrying
		// cannot help; say loudly what it was.
		b.log.Error("dropping event that does not encode", zap.String("type", e.Type()),
			zap.String("subject", e.Subject()), zap.Error(err))
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.PublishTimeout)
	defer cancel()
	start := time.Now()
	ack, err := b.publisher.PublishMsg(ctx, msg)
	if err != nil {
		b.metrics.publishErrors.Inc()
		b.log.Debug("publish failed, will retry", zap.String("subject", msg.Subject), zap.Error(err))
		return fmt.Errorf("publishing %s: %w", msg.Subject, err)
	}
	b.metrics.latency.Observe(time.Since(start).Seconds())
	b.metrics.published.WithLabelValues(e.Type()).Inc()
	if ack.Duplicate {
		b.metrics.duplicates.Inc()
	}
	return nil
}
