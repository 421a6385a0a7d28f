package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// etcdBackupSecret is the secret a BackupEntry writes into its shoot's namespace.
const etcdBackupSecret = "etcd-backup"

// observer watches BackupEntries and the secrets named etcd-backup and records, for every
// entry the benchmark tracks, when it converged and when it was gone. Times are taken when the
// watch event arrives, so the observer's own lag is the same for every implementation.
type observer struct {
	cancel context.CancelFunc

	mu      sync.Mutex
	entries map[string]*entryObs // by entry name
	byNS    map[string]*entryObs // by the entry's shoot namespace
}

// entryObs is what the observer knows about one tracked entry.
type entryObs struct {
	name string

	created     time.Time // the driver's create call started
	deleteStart time.Time // the driver's deletion (confirmation patch) started

	entryOK   bool // Succeeded with observedGeneration == generation
	secretOK  bool // etcd-backup is in the shoot namespace
	converged time.Time
	gone      time.Time

	// secretWrites counts the versions of the etcd-backup secret seen (created, then every
	// modification).
	secretWrites int
	secretRV     string
	state        string // the last lastOperation seen, for diagnostics
}

func startObserver(cfg *rest.Config) (*observer, error) {
	ext, err := kube.ExtensionsRESTClient(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{cancel: cancel, entries: map[string]*entryObs{}, byNS: map[string]*entryObs{}}

	entries := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(ext, "backupentries", "", fields.Everything()),
		&extensionsv1alpha1.BackupEntry{}, 0, cache.Indexers{})
	if _, err := entries.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.entryChanged(obj) },
		UpdateFunc: func(_, obj any) { o.entryChanged(obj) },
		DeleteFunc: o.entryDeleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", etcdBackupSecret).String()
	}))
	secrets := factory.Core().V1().Secrets().Informer()
	if _, err := secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.secretChanged(obj) },
		UpdateFunc: func(_, obj any) { o.secretChanged(obj) },
		DeleteFunc: o.secretDeleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	go entries.RunWithContext(ctx)
	go secrets.RunWithContext(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), entries.HasSynced, secrets.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the observer's informers did not sync")
	}
	return o, nil
}

func (o *observer) stop() { o.cancel() }

// track registers entries before they are created.
func (o *observer) track(names []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range names {
		eo := &entryObs{name: n}
		o.entries[n] = eo
		o.byNS[gardener.EntryNamespace(n)] = eo
	}
}

func (o *observer) setCreated(name string, t time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entries[name].created = t
}

func (o *observer) setDeleteStart(name string, t time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entries[name].deleteStart = t
}

func (o *observer) entryChanged(obj any) {
	now := time.Now()
	e, ok := obj.(*extensionsv1alpha1.BackupEntry)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	eo := o.entries[e.Name]
	if eo == nil {
		return
	}
	op := e.Status.LastOperation
	eo.entryOK = op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded && e.Status.ObservedGeneration == e.Generation
	if op != nil {
		eo.state = fmt.Sprintf("%s/%s (observedGeneration %d, generation %d): %s", op.Type, op.State, e.Status.ObservedGeneration, e.Generation, op.Description)
	}
	eo.check(now)
}

func (o *observer) entryDeleted(obj any) {
	now := time.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	e, ok := obj.(*extensionsv1alpha1.BackupEntry)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if eo := o.entries[e.Name]; eo != nil && eo.gone.IsZero() {
		eo.gone = now
		eo.entryOK = false
	}
}

func (o *observer) secretChanged(obj any) {
	now := time.Now()
	s, ok := obj.(*corev1.Secret)
	if !ok || s.Name != etcdBackupSecret {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	eo := o.byNS[s.Namespace]
	if eo == nil {
		return
	}
	if s.ResourceVersion != eo.secretRV {
		eo.secretRV = s.ResourceVersion
		eo.secretWrites++
	}
	eo.secretOK = true
	eo.check(now)
}

func (o *observer) secretDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if eo := o.byNS[s.Namespace]; eo != nil {
		eo.secretOK = false
		eo.secretRV = ""
	}
}

// check records the first moment both conditions hold.
func (eo *entryObs) check(now time.Time) {
	if eo.entryOK && eo.secretOK && eo.converged.IsZero() {
		eo.converged = now
	}
}

// snapshot copies what the observer knows about names.
func (o *observer) snapshot(names []string) []entryObs {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]entryObs, len(names))
	for i, n := range names {
		out[i] = *o.entries[n]
	}
	return out
}

// secretsLeft lists the tracked namespaces among names that still hold an etcd-backup secret.
func (o *observer) secretsLeft(names []string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var left []string
	for _, n := range names {
		if o.entries[n].secretOK {
			left = append(left, gardener.EntryNamespace(n))
		}
	}
	sort.Strings(left)
	return left
}
