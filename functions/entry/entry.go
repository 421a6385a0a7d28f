// Package entry is the BackupEntry function: it writes the etcd-backup secret that
// etcd-backup-restore reads into the shoot's control-plane namespace, and when the entry is
// deleted, schedules the purge of its backups on the NATS server for when their retention
// ends; the entry keeps its finalizers until the purge function has done that work. An entry
// due the moment it is deleted (retention 0) it purges itself, as the purge function would.
package entry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

const (
	// Finalizer is Gardener's BackupEntry finalizer, on the entry and its secret.
	Finalizer = "extensions.gardener.cloud/backupentry"
	// SecretName is the secret etcd-backup-restore reads; SourceSecretName the one of a
	// control-plane migration's source entry.
	SecretName       = "etcd-backup"
	SourceSecretName = "source-etcd-backup"
	// AnnotationCreatedBy names the entry that wrote the secret (gardener#8675: an old entry
	// must not delete a new shoot's secret).
	AnnotationCreatedBy = "backup.gardener.cloud/created-by"
	// DataKeyBucketName is added to the secret's data.
	DataKeyBucketName = "bucketName"
	// DueMessageTTL bounds how long a fired purge message stays in the stream; a purge not done
	// by then is scheduled again by the next event about the entry.
	DueMessageTTL = 24 * time.Hour
)

// Actuator writes etcd-backup secrets and schedules purges.
type Actuator struct {
	Client client.Client
	// Metadata, if set, is a cache of the metadata of namespaces and of etcd-backup secrets
	// (see MetadataCacheOptions). A warm function answers from it instead of asking the API
	// server; what it does not hold is read live, and what it holds stale makes a write fail
	// on its precondition, never go astray.
	Metadata client.Reader
	// Policies, if set, is a cache of BackupCopyPolicies and BackupBuckets (CopiesCacheOptions),
	// read before the API server (kube.CachedOrLive) for which policy has failed over the
	// entry's bucket. Its lag does not keep etcd-backup wrong: the copy function asks each
	// entry of a policy to reconcile when its fail-over starts and ends, an event that outruns
	// the cache's watch only while that watch is broken; gardenlet has the entry reconciled
	// again (another event) before it redeploys the shoot's etcd, which is when
	// etcd-backup-restore takes the secret's bucket; and the bridge announces every entry each
	// resync period.
	Policies  client.Reader
	JetStream jetstream.JetStream
	// Providers add what each provider type's etcd-backup holds beside the credentials.
	Providers objectstore.Registry
	Retention Retention
	Cluster   string
	Now       func() time.Time
	// Purger, if set, purges an entry that is due when it is deleted, here and now (purgesNow),
	// instead of scheduling it.
	Purger *Purger
}

// SecretRef is where the etcd-backup secret of entry e lives.
func SecretRef(e *extensionsv1alpha1.BackupEntry) corev1.SecretReference {
	name := SecretName
	if gardener.IsSourceEntry(e.Name) {
		name = SourceSecretName
	}
	return corev1.SecretReference{Namespace: gardener.EntryNamespace(e.Name), Name: name}
}

// Reconcile writes the etcd-backup secret: the data of spec.secretRef plus bucketName. It
// writes only into a namespace that exists, is not terminating and belongs to the entry's
// shoot; otherwise it succeeds with a description that says why the secret waits (a lastError
// would fail gardenlet's shoot operations for a namespace that is simply not there yet), and
// the bridge announces the entry again when the namespace appears or changes hands.
func (a *Actuator) Reconcile(ctx context.Context, e *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret) (gardener.Reconciliation, error) {
	result, err := a.reconcile(ctx, e, credentials)
	if err == nil {
		result = a.warnRetention(e, result)
	}
	return result, err
}

// warnRetention says in the success description that the entry's retention annotation is
// malformed: found at create, not when the shoot is deleted, and without a lastError, which
// would fail gardenlet's shoot operation for what is only a later purge's setting.
func (a *Actuator) warnRetention(e *extensionsv1alpha1.BackupEntry, r gardener.Reconciliation) gardener.Reconciliation {
	if _, err := a.Retention.Of(e); err != nil {
		if r.Description == "" {
			r.Description = "BackupEntry reconciled"
		}
		r.Description += "; " + err.Error() + ": fix it, or the purge waits (nothing is deleted) when the entry is deleted"
	}
	return r
}

func (a *Actuator) reconcile(ctx context.Context, e *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret) (gardener.Reconciliation, error) {
	ref := SecretRef(e)
	ns, err := a.namespace(ctx, ref.Namespace)
	if err != nil {
		return gardener.Reconciliation{}, err
	}
	if ns == nil {
		return waitsForNamespace(ref, "does not exist"), nil
	}
	if reason := unusable(ns, e); reason != "" {
		return waitsForNamespace(ref, reason), nil
	}
	if len(a.Retention.ByPurpose) > 0 {
		if err := a.recordPurpose(ctx, e, ref.Namespace); err != nil {
			return gardener.Reconciliation{}, err
		}
	}
	wi, err := workloadIdentityOf(credentials)
	if err != nil {
		return gardener.Reconciliation{}, err
	}
	want, err := etcdBackupData(a.Providers, e, credentials, wi)
	if err != nil {
		return gardener.Reconciliation{}, err
	}
	var done gardener.Reconciliation
	switch policy, err := destination.FailOverOf(ctx, kube.CachedOrLive(a.Policies, a.Client), e); {
	case err != nil:
		return gardener.Reconciliation{}, err
	case policy != nil:
		data, why, err := a.failOver(ctx, e, policy)
		switch {
		case err != nil:
			return gardener.Reconciliation{}, err
		case data != nil:
			want, wi, done.Description = data, nil, failedOverDescription(policy)
		default:
			done.Description = "BackupEntry reconciled; " + why
		}
	}
	err = a.writeSecret(ctx, ref, e.Name, want, wi)
	switch {
	case err == nil:
		return done, nil
	case apierrors.IsNotFound(err): // the namespace went away since it was read
		return waitsForNamespace(ref, "does not exist"), nil
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return waitsForNamespace(ref, "is terminating"), nil
	default:
		return gardener.Reconciliation{}, fmt.Errorf("writing secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
}

// EtcdBackupData is the data of e's etcd-backup secret, given the secret its spec.secretRef
// names (gardenlet's copy of the bucket's generated secret, or of its credentials): as
// upstream's generic actuator builds it, that secret's data (only config for a workload
// identity's), bucketName, and what e's provider adds (objectstore.EntrySecret). Every write
// of etcd-backup is this whole map, never a part of it.
func EtcdBackupData(providers objectstore.Registry, e *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret) (map[string][]byte, error) {
	wi, err := workloadIdentityOf(credentials)
	if err != nil {
		return nil, err
	}
	return etcdBackupData(providers, e, credentials, wi)
}

func etcdBackupData(providers objectstore.Registry, e *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret, wi *workloadIdentity) (map[string][]byte, error) {
	want := maps.Clone(credentials.Data)
	if wi != nil {
		// A workload identity's secret has config (and the token the requestor writes into
		// etcd-backup itself): nothing else is copied.
		want = map[string][]byte{KeyConfig: credentials.Data[KeyConfig]}
	}
	if want == nil {
		want = map[string][]byte{}
	}
	want[DataKeyBucketName] = []byte(e.Spec.BucketName)
	extra, err := providerData(providers, e, credentials, wi)
	if err != nil {
		return nil, err
	}
	maps.Copy(want, extra)
	return want, nil
}

// providerData is what e's provider adds to its etcd-backup secret (objectstore.EntrySecret).
func providerData(providers objectstore.Registry, e *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret, wi *workloadIdentity) (map[string][]byte, error) {
	p, ok := providers[e.Spec.Type].(objectstore.EntrySecret)
	if !ok {
		return nil, nil
	}
	in := objectstore.Entry{Region: e.Spec.Region, Source: gardener.IsSourceEntry(e.Name)}
	if wi != nil {
		in.WorkloadIdentity = credentials.Data[KeyConfig]
	}
	data, err := p.EntrySecretData(in)
	return data, gardener.FromStore(err)
}

// writeSecret makes the secret at ref exactly what entry writes: its data, its own labels
// and annotations (stale ones go, as upstream writes it), and with a workload identity its
// marks and the token its requestor wrote. A secret the cache does not know is created without
// a read first: that is every new entry's. An existing one is patched with its
// resourceVersion: the token requestor writes the same secret (gardener#6092).
func (a *Actuator) writeSecret(ctx context.Context, ref corev1.SecretReference, entry string, data map[string][]byte, wi *workloadIdentity) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	mutate := func() {
		annotations := map[string]string{AnnotationCreatedBy: entry}
		labels := map[string]string{gardener.LabelManagedBy: gardener.ManagedBy}
		want := data
		if wi != nil {
			want = maps.Clone(data)
			wi.apply(secret, labels, annotations, want)
		}
		secret.Annotations, secret.Labels = annotations, labels
		secret.Type = corev1.SecretTypeOpaque
		if !maps.EqualFunc(secret.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) {
			secret.Data = want
		}
	}
	if cached, err := a.cachedSecret(ctx, ref); err == nil && cached == nil {
		mutate()
		if err := a.Client.Create(ctx, secret); !apierrors.IsAlreadyExists(err) {
			return err
		}
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	}
	// A conflict is the token requestor's write between our read and our patch: read again.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			mutate()
			return a.Client.Create(ctx, secret)
		}
		base := secret.DeepCopy()
		mutate()
		if equality.Semantic.DeepEqual(base, secret) {
			return nil
		}
		return a.Client.Patch(ctx, secret, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// namespace reads the metadata of namespace name, from the cache if it has it; nil if there
// is no such namespace.
func (a *Actuator) namespace(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	ns := metadataOf("Namespace")
	switch err := kube.CachedOrLive(a.Metadata, a.Client).Get(ctx, client.ObjectKey{Name: name}, ns); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}

// cachedSecret is the metadata the cache holds of the secret at ref: nil if it holds none,
// and an error without a cache.
func (a *Actuator) cachedSecret(ctx context.Context, ref corev1.SecretReference) (*metav1.PartialObjectMetadata, error) {
	if a.Metadata == nil {
		return nil, errNoCache
	}
	s := metadataOf("Secret")
	err := a.Metadata.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return s, nil
}

var errNoCache = errors.New("no metadata cache")

// unusable says why the entry must not write its secret into ns, or "" if it may.
func unusable(ns *metav1.PartialObjectMetadata, e *extensionsv1alpha1.BackupEntry) string {
	if ns.DeletionTimestamp != nil {
		return "is terminating"
	}
	if owner, foreign := gardener.NamespaceOwner(ns.Annotations, e.Name); foreign {
		return fmt.Sprintf("belongs to shoot %s, not to this entry's shoot %s", owner, gardener.EntryShootUID(e.Name))
	}
	return ""
}

func waitsForNamespace(ref corev1.SecretReference, reason string) gardener.Reconciliation {
	return gardener.Reconciliation{Description: fmt.Sprintf("BackupEntry reconciled; namespace %s %s: secret %s is written when the shoot's namespace is there", ref.Namespace, reason, ref.Name)}
}

// Delete removes the etcd-backup secret if this entry wrote it and schedules the purge of the
// entry's backups for when their retention ends; the entry waits, Pending, until then.
func (a *Actuator) Delete(ctx context.Context, e *extensionsv1alpha1.BackupEntry) (gardener.Deletion, error) {
	if err := a.deleteSecret(ctx, e); err != nil {
		return gardener.Deletion{}, err
	}
	retention, err := a.Retention.Of(e)
	if err != nil {
		return gardener.Deletion{}, gardener.Permanent(err, gardencorev1beta1.ErrorConfigurationProblem)
	}
	due, _ := a.Retention.Due(e)
	data := events.PurgeData{
		Entry: e.Name, UID: string(e.UID), BucketName: e.Spec.BucketName,
		Prefix: gardener.EntryPrefix(e.Name), DueAt: due,
	}
	if a.purgesNow(e, due) {
		return gardener.Deletion{}, a.purgeNow(ctx, e, data)
	}
	if err := a.schedule(ctx, e, data); err != nil {
		return gardener.Deletion{}, err
	}
	return gardener.Deletion{
		Pending:     true,
		Description: fmt.Sprintf("Backups under %s are purged at %s (retention %s)", gardener.EntryPrefix(e.Name), due.Format(time.RFC3339), retention),
	}, nil
}

// purgesNow says whether the entry function purges e's backups itself: e, just read live, is
// due by then and its bucket's provider is one this process opens. A schedule would wait for
// the server's timer floor (250 ms) to have the purge function make the same checks of the
// same live object; and no event's word is trusted either way.
func (a *Actuator) purgesNow(e *extensionsv1alpha1.BackupEntry, due time.Time) bool {
	if a.Purger == nil || due.After(a.Now()) {
		return false
	}
	_, err := a.Purger.Providers.Get(e.Spec.Type)
	return err == nil
}

// purgeNow purges the backups of e, which is due: the purge function's work, in this function.
// The reconciler releases e once it returns; a failure is e's Delete error, retried as such.
func (a *Actuator) purgeNow(ctx context.Context, e *extensionsv1alpha1.BackupEntry, data events.PurgeData) error {
	log := a.Purger.Log.With(zap.String("entry", e.Name), zap.String("uid", string(e.UID)))
	done, err := a.Purger.purgeDue(ctx, log, e, data)
	if err != nil {
		return err
	}
	if done != nil {
		a.Purger.announce(ctx, log, events.OpPurgeCompleted, e, *done)
	}
	return nil
}

// schedule publishes the purge-due event as a message the NATS server delivers at data.DueAt,
// and reports it.
func (a *Actuator) schedule(ctx context.Context, e *extensionsv1alpha1.BackupEntry, data events.PurgeData) error {
	if err := publishPurge(ctx, a.JetStream, a.Cluster, events.OpPurgeDue, e, data, data.DueAt, a.Now()); err != nil {
		return err
	}
	// The report goes to the audit stream: lost, the purge is still scheduled.
	if err := publishPurge(ctx, a.JetStream, a.Cluster, events.OpPurgeScheduled, e, data, time.Time{}, a.Now()); err != nil && a.Purger != nil {
		a.Purger.Log.Warn("cannot publish purge event", zap.String("entry", e.Name), zap.String("operation", string(events.OpPurgeScheduled)), zap.Error(err))
	}
	return nil
}

// deleteSecret removes the etcd-backup secret unless another entry wrote it, or, when no
// entry is named as its writer, the namespace belongs to another shoot. The namespace is read
// only in that case: a secret this entry wrote (the name carries the shoot's uid) is its own.
//
// The cache's copy of the secret, if it has one, stands in for a read: the delete carries its
// uid, so a stale copy fails the precondition and the secret is read live.
func (a *Actuator) deleteSecret(ctx context.Context, e *extensionsv1alpha1.BackupEntry) error {
	ref := SecretRef(e)
	if cached, err := a.cachedSecret(ctx, ref); err == nil && cached != nil {
		err := a.deleteIfOurs(ctx, e, cached)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	live := metadataOf("Secret")
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return a.deleteIfOurs(ctx, e, live)
}

// deleteIfOurs deletes the secret s describes, exactly that one (its uid), if e wrote it.
func (a *Actuator) deleteIfOurs(ctx context.Context, e *extensionsv1alpha1.BackupEntry, s *metav1.PartialObjectMetadata) error {
	owner, named := s.Annotations[AnnotationCreatedBy]
	if named && owner != e.Name {
		return nil // a newer entry's secret (gardener#8675)
	}
	if !named {
		ns, err := a.namespace(ctx, s.Namespace)
		if err != nil {
			return err
		}
		if ns != nil {
			if _, foreign := gardener.NamespaceOwner(ns.Annotations, e.Name); foreign {
				return nil // a re-created shoot's namespace: its secret is not ours
			}
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
	err := a.Client.Delete(ctx, secret, client.Preconditions{UID: &s.UID})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return err // not the secret s describes any more: the caller reads it again
	default:
		return fmt.Errorf("deleting secret %s/%s: %w", s.Namespace, s.Name, err)
	}
}
