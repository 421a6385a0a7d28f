package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// recallTimeout bounds reading the last announcements at the start of a term: without them
// every object is announced, which costs work but loses nothing.
const recallTimeout = time.Minute

// announced remembers the inputs (inputsOf) of every object's last event, by queue key
// (kind/uid): read from the stream of record at the start of a term (recall) and kept as events
// are acknowledged. An object listed again unchanged — at the start of a term, at a relist, at
// the periodic resync — whose inputs are those of its last event was announced already: its
// function acted on that state (or will: the stream holds the event), so announcing it again
// would only make the function do it once more: a restart after JetStream's duplicate window,
// or a resync past it, costs no function run per settled object.
type announced struct {
	mu   sync.Mutex
	last map[string]string
	// held are the objects of the initial lists with no work outstanding, by key, announced or
	// not once every informer synced (release): only then are their inputs known.
	held map[string]heldObject
}

type heldObject struct {
	kind *kind
	obj  client.Object
}

func newAnnounced() *announced {
	return &announced{last: map[string]string{}, held: map[string]heldObject{}}
}

// inputs returns the inputs of key's last event, if the bridge knows it.
func (a *announced) inputs(key string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	inputs, ok := a.last[key]
	return inputs, ok
}

// acknowledged records e, acknowledged by JetStream, as key's last event.
func (a *announced) acknowledged(key string, e cloudevents.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if deletedType(e.Type()) {
		delete(a.last, key)
		return
	}
	if inputs, _ := e.Extensions()[events.ExtInputs].(string); inputs != "" {
		a.last[key] = inputs
	}
}

// forget drops key's last inputs: its object is gone.
func (a *announced) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.last, key)
}

// retain keeps the last inputs of the keys keep reports true for.
func (a *announced) retain(keep func(key string) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	maps.DeleteFunc(a.last, func(key, _ string) bool { return !keep(key) })
}

// hold keeps obj for release.
func (a *announced) hold(key string, k *kind, obj client.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[key] = heldObject{kind: k, obj: obj}
}

// drop forgets a held object: a newer event of it is queued.
func (a *announced) drop(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.held, key)
}

// takeHeld returns the held objects and holds nothing from now on.
func (a *announced) takeHeld() map[string]heldObject {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := a.held
	a.held = nil
	return held
}

// holding reports whether initial-list objects are still held.
func (a *announced) holding() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held != nil
}

// recordReader reads the stream of record; jetstream.JetStream is one.
type recordReader interface {
	CreateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error)
	DeleteConsumer(ctx context.Context, stream, consumer string) error
}

// objectSubjects are the subjects of every object event.
func objectSubjects() []string {
	subjects := make([]string, len(kinds))
	for i, k := range kinds {
		subjects[i] = k.subject
	}
	return subjects
}

// recall reads the inputs of every object's last event from the stream of record: the last
// message of each object subject (one per operation and object name), headers only, the newest
// per object. If the stream cannot be read, every object is announced at the start.
func (b *Bridge) recall(ctx context.Context) {
	r, ok := b.publisher.(recordReader)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recallTimeout)
	defer cancel()
	start := time.Now()
	last, err := readLastInputs(ctx, r)
	if err != nil {
		b.log.Warn("cannot read the objects' last events; announcing every object", zap.Error(err))
		return
	}
	b.announced.mu.Lock()
	maps.Copy(b.announced.last, last)
	b.announced.mu.Unlock()
	b.log.Info("read the objects' last events", zap.Int("objects", len(last)), zap.Duration("took", time.Since(start).Round(time.Millisecond)))
}

func readLastInputs(ctx context.Context, r recordReader) (map[string]string, error) {
	// A consumer of its own name (the bridge's rights name it), new each time: one left by an
	// earlier term would resume where that term stopped.
	if err := r.DeleteConsumer(ctx, events.RecordStream, events.RecallConsumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	cons, err := r.CreateConsumer(ctx, events.RecordStream, jetstream.ConsumerConfig{
		Name:              events.RecallConsumer,
		FilterSubjects:    objectSubjects(),
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		InactiveThreshold: recallTimeout,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = r.DeleteConsumer(ctx, events.RecordStream, events.RecallConsumer)
	}()
	type last struct {
		seq    uint64
		inputs string
	}
	newest := map[string]last{}
	err = natsconn.ReadPending(ctx, cons, 1000, func(msg jetstream.Msg) (bool, error) {
		meta, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		h := msg.Headers()
		key := headerValue(h, events.ExtKind) + "/" + headerValue(h, events.ExtUID)
		if seen, ok := newest[key]; ok && seen.seq > meta.Sequence.Stream {
			return true, nil
		}
		inputs := headerValue(h, events.ExtInputs)
		if deletedType(headerValue(h, "type")) {
			inputs = ""
		}
		newest[key] = last{seq: meta.Sequence.Stream, inputs: inputs}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(newest))
	for key, l := range newest {
		if l.inputs != "" {
			out[key] = l.inputs
		}
	}
	return out, nil
}

// deletedType reports whether eventType announces an object gone from the API server.
func deletedType(eventType string) bool {
	return strings.HasSuffix(eventType, "."+string(events.OpDeleted)+".v1")
}

// headerValue is the CloudEvents attribute or extension name's header value (ce-<name>).
func headerValue(h map[string][]string, name string) string {
	if v := h["ce-"+name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// inputsOf is the digest of what the function of o, of kind k, acts on in o, as the bridge sees
// it now: o's generation, whether it is being deleted, its annotations that carry desired state
// (not those relevantChange ignores, nor those a function consumes: present, they make o
// outstanding), the digest of its credentials' data (spec.secretRef) and its control-plane
// namespace (its uid and the shoot it belongs to). Status, finalizers and labels are left out:
// the functions' own writes change them.
func (b *Bridge) inputsOf(k *kind, o client.Object) string {
	h := sha256.New()
	part := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	part(strconv.FormatInt(o.GetGeneration(), 10))
	part(strconv.FormatBool(o.GetDeletionTimestamp() != nil))
	annotations := o.GetAnnotations()
	for _, a := range slices.Sorted(maps.Keys(annotations)) {
		switch a {
		case timestampAnnotation, deletionConfirmationAnnotation, operationAnnotation, azureRotateAnnotation:
			continue
		}
		part(a)
		part(annotations[a])
	}
	if ref, ok := k.secretRef(o); ok {
		part("secret")
		part(b.secrets.digest(ref.Namespace, ref.Name))
	}
	if name, ok := k.controlPlane(o); ok {
		part("namespace")
		if ns, ok := getAs[*corev1.Namespace](b.namespaces.GetStore(), name); ok {
			part(string(ns.UID))
			part(ns.Annotations[gardener.ShootUIDAnnotation])
		}
	}
	// Sixteen bytes tell states apart; the credentials' digest stays hashed in with the rest.
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// announceUnchanged queues the synced event of obj, listed again without a change: with a new
// id if obj has work outstanding (again), with its deterministic id if no last event is known,
// with one new to the duplicate window if its inputs differ from its last event's, and not at
// all if they are the same — then it reports true.
func (b *Bridge) announceUnchanged(k *kind, obj client.Object) bool {
	if !b.filter.handles(k, obj) {
		return false
	}
	if opts := b.again(k, obj); opts != nil {
		b.enqueue(k, events.OpSynced, obj, opts...)
		return false
	}
	key := queueKey(k.kind, obj)
	last, known := b.announced.inputs(key)
	switch inputs := b.inputsOf(k, obj); {
	case !known:
		b.enqueue(k, events.OpSynced, obj)
	case last != inputs:
		// Changed while no bridge watched (credentials rotated, a namespace created): the
		// object's own state may be one whose event JetStream still holds in its window.
		b.enqueue(k, events.OpSynced, obj, events.WithTrigger("inputs/"+inputs))
	default:
		b.metrics.unchanged.Inc()
		return true
	}
	return false
}

// listed handles obj of an initial list: announced now if it has work outstanding, else held
// until every informer synced (release).
func (b *Bridge) listed(k *kind, obj client.Object) {
	if !b.filter.handles(k, obj) {
		return
	}
	if outstanding(k, obj) || !b.announced.holding() {
		b.announceUnchanged(k, obj)
		return
	}
	b.announced.hold(queueKey(k.kind, obj), k, obj)
}

// release announces the held objects of the initial lists, now that every informer synced and
// their inputs are known, each in its current state. It returns how many were unchanged.
func (b *Bridge) release() int {
	unchanged := 0
	for _, h := range b.announced.takeHeld() {
		obj := h.obj
		if inf := b.informerOf(h.kind.kind); inf != nil {
			cur, exists, err := inf.GetStore().Get(h.obj)
			if err == nil && !exists {
				continue // deleted meanwhile
			}
			if o, ok := as[client.Object](cur); err == nil && ok {
				obj = o
			}
		}
		if b.announceUnchanged(h.kind, obj) {
			unchanged++
		}
	}
	b.forgetGone()
	return unchanged
}

// forgetGone drops the recalled inputs of the objects of watched kinds that no informer lists:
// deleted while no bridge watched, or deleted with no deleted event recorded (the stream's last
// event of such an object is its deleting one).
func (b *Bridge) forgetGone() {
	watched, exists := map[events.Kind]bool{}, map[string]bool{}
	for _, w := range b.watches {
		inf := w.informer()
		if inf == nil {
			continue // not served (yet): its objects' inputs stay
		}
		watched[w.kind.kind] = true
		for _, o := range inf.GetStore().List() {
			if obj, ok := as[client.Object](o); ok {
				exists[queueKey(w.kind.kind, obj)] = true
			}
		}
	}
	b.announced.retain(func(key string) bool {
		kind, _, _ := strings.Cut(key, "/")
		return !watched[events.Kind(kind)] || exists[key]
	})
}

// queueKey is an object's key in the queue and in announced: kind and uid, not name — a deleted
// object and its re-created namesake are two objects.
func queueKey(kind events.Kind, o client.Object) string {
	return string(kind) + "/" + string(o.GetUID())
}
