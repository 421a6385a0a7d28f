package entry

import (
	"context"
	"flag"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// StatusWriter writes BackupEntries as the Gardener protocol does; the purge function uses it
// to record its progress and release an entry once its backups are gone.
func StatusWriter(c client.Client, log *zap.Logger) gardener.StatusWriter[*extensionsv1alpha1.BackupEntry] {
	return gardener.StatusWriter[*extensionsv1alpha1.BackupEntry]{
		Client:    c,
		Kind:      events.KindBackupEntry,
		SecretRef: func(e *extensionsv1alpha1.BackupEntry) corev1.SecretReference { return e.Spec.SecretRef },
		Finalizer: Finalizer,
		Log:       log,
		Now:       time.Now,
	}
}

// Definition declares the entry function. It reads metadata from a cache (MetadataCacheOptions),
// and BackupCopyPolicies and BackupBuckets from another (CopiesCacheOptions), when it is given a
// Kubernetes configuration to start them from.
var Definition = runner.Definition{
	Name: "entry",
	// It purges an entry that is due when it is deleted.
	Needs: runner.Needs{APIServer: true, Stores: true},
	Types: []string{events.TypeEntryCreated, events.TypeEntryUpdated, events.TypeEntryDeleting, events.TypeEntrySynced},
	// The purge schedules and their announcements, and the outcome of the purges it does itself
	// (an entry due when it is deleted).
	Publishes: append([]string{events.SubjectPurgeSchedules}, events.SubjectFilters(events.TypePurgeScheduled, events.TypePurgeCompleted)...),
	Bind: func(fs *flag.FlagSet) runner.Constructor {
		retention := BindRetention(fs)
		scope := gardener.BindScope(fs)
		return func(ctx context.Context, d runner.Deps) (runner.Handler, error) {
			// It writes etcd-backup from the credentials, and opens a bucket only to purge an
			// entry due when it is deleted, where its stores can (purgesNow): else it schedules.
			s, err := scope(nil)
			if err != nil {
				return nil, err
			}
			// It still needs every type's provider: each knows what its etcd-backup adds.
			if err := s.Links(d.Stores); err != nil {
				return nil, err
			}
			var metadata, policies client.Reader
			if d.Config != nil {
				metadata = kube.StartCache(ctx, d.Config, MetadataCacheOptions(), d.FirstEventSettled, d.Log)
				policies = kube.StartCache(ctx, d.Config, CopiesCacheOptions(), d.FirstEventSettled, d.Log)
			}
			return newReconciler(d.Client, caches{metadata, policies}, d.JetStream, d.Stores, *retention, s, d.Cluster, d.Log, NewCopyMetrics(d.Metrics)), nil
		}
	},
}

// caches are what the entry function reads from before the API server: metadata a cache
// configured by MetadataCacheOptions, policies one configured by CopiesCacheOptions; nil reads
// that from the API server.
type caches struct{ metadata, policies client.Reader }

// newReconciler returns the entry function's handler, reading from cached what it holds;
// copies count the purges of the copies of the entries it purges itself.
func newReconciler(c client.Client, cached caches, js jetstream.JetStream, providers objectstore.Registry, retention Retention, scope gardener.Scope, cluster string, log *zap.Logger, copies *CopyMetrics) *gardener.Reconciler[*extensionsv1alpha1.BackupEntry] {
	purger := newPurger(c, js, providers, retention, scope, cluster, log.Named("purge"))
	purger.Copies, purger.Policies = copies, cached.policies
	a := &Actuator{Client: c, Metadata: cached.metadata, Policies: cached.policies, JetStream: js, Providers: providers, Retention: retention, Cluster: cluster, Now: time.Now,
		Purger: purger}
	return &gardener.Reconciler[*extensionsv1alpha1.BackupEntry]{
		StatusWriter: StatusWriter(c, log),
		Scope:        scope,
		NewObject:    func() *extensionsv1alpha1.BackupEntry { return &extensionsv1alpha1.BackupEntry{} },
		Migrates:     true,
		Actuator:     a,
	}
}

// MetadataCacheOptions configure the cache the entry function reads metadata from: of
// namespaces, and of secrets named etcd-backup. Metadata only: no secret value is cached, and
// of the metadata only what the function reads (cachedMetadata), so that what it holds per
// entry stays the same however many labels a seed puts on a shoot's namespace: 1.7 KB for the
// namespace and the secret together, against 3 KB untrimmed with a seed's labels
// (BenchmarkMetadataCachePerEntry).
func MetadataCacheOptions() cache.Options {
	return cache.Options{
		Scheme:           kube.Scheme,
		DefaultTransform: cachedMetadata,
		ByObject: map[client.Object]cache.ByObject{
			metadataOf("Namespace"): {},
			metadataOf("Secret"):    {Field: fields.OneTermEqualSelector("metadata.name", SecretName)},
		},
	}
}

// CopiesCacheOptions configure the cache the entry and purge functions read BackupCopyPolicies
// and BackupBuckets from: which policy has failed over an entry's bucket, and which
// destinations hold its copies (destination.FailOverOf, CopiesOf). Both kinds are few and
// cluster-scoped; their managed fields are not kept. Its own cache, not the metadata's: where
// the BackupCopyPolicy CRD is not installed it finds no policy without asking (kube.StartCache
// looks for the CRD again every minute), and the metadata cache runs all the same.
func CopiesCacheOptions() cache.Options {
	return cache.Options{
		Scheme:           kube.Scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&backupv1alpha1.BackupCopyPolicy{}: {},
			&extensionsv1alpha1.BackupBucket{}: {},
		},
	}
}

// cachedAnnotations are the annotations the function reads from the cache: which shoot a
// namespace belongs to, and which entry wrote an etcd-backup secret.
var cachedAnnotations = []string{gardener.ShootUIDAnnotation, AnnotationCreatedBy}

// cachedMetadata keeps of an object's metadata what the function reads: its identity, its
// deletion and cachedAnnotations.
func cachedMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
	}}
	for _, k := range cachedAnnotations {
		if v, ok := m.Annotations[k]; ok {
			if kept.Annotations == nil {
				kept.Annotations = map[string]string{}
			}
			kept.Annotations[k] = v
		}
	}
	return kept, nil
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}
