package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/housekeeper-dev/housekeeper/events"
)

// The indexes of a kind's objects by what they refer to (kinds.go, relations).
const (
	// byControlPlane indexes objects by their control-plane namespace.
	byControlPlane = "controlPlane"
	// bySecretRef indexes objects by their spec.secretRef.
	bySecretRef = "secretRef"
	// bySecretNamespace indexes handled objects by the namespace of their spec.secretRef.
	bySecretNamespace = "secretNamespace"
)

// Bridge watches the objects of every kind in kinds and the Namespaces and Secrets they refer
// to, and publishes events.
type Bridge struct {
	opts      Options
	filter    filter
	publisher Publisher
	queue     *queue
	metrics   *metrics
	state     *stateMetrics
	log       *zap.Logger

	// watches are the kinds watched, one per row of kinds; an optional kind's informer is made
	// once the API server serves the kind.
	watches    []*watchedKind
	source     *kindSource
	namespaces cache.SharedIndexInformer
	secrets    *secretWatch
	announced  *announced
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
	source, err := newKindSource(cfg, opts.ResyncPeriod)
	if err != nil {
		return nil, err
	}
	core, err := coreClient(cfg)
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
		source:    source,
	}
	if reg != nil {
		reg.MustRegister(newDrillCollector(b.statusStore(events.KindRestoreDrill)), newCopyCollector(b.statusStore(events.KindBackupCopyPolicy)))
	}
	if err := b.makeInformers(core); err != nil {
		return nil, err
	}
	return b, nil
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
	informers.Go(func() { b.namespaces.RunWithContext(watchCtx) })
	for _, w := range b.watches {
		if inf := w.informer(); inf != nil {
			informers.Go(func() { inf.RunWithContext(watchCtx) })
		} else {
			informers.Go(func() { b.awaitKind(watchCtx, w) })
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
		counts := []zap.Field{zap.Strings("secretNamespaces", b.secrets.watched()), zap.Int("queued", b.queue.pending()), zap.Int("unchanged", unchanged)}
		for _, w := range b.watches {
			if inf := w.informer(); inf != nil {
				counts = append(counts, zap.Int(string(w.kind.kind), len(inf.GetStore().ListKeys())))
			}
		}
		b.log.Info("informers synced", counts...)
		// Each dispatcher holds one event at the pacer: as many as can go out together.
		group := min(publishGroup, b.opts.MaxInFlight)
		pace := newPacer(publishInterval, group)
		for range group {
			dispatchers.Go(func() { b.dispatch(publishCtx, pace, acks) })
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
