// Package bucket is the BackupBucket function: it creates the bucket in the object store,
// issues the generated secret etcd-backup-restore reads, and on deletion removes both once no
// BackupEntry uses the bucket any more.
package bucket

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

const (
	// Finalizer is Gardener's BackupBucket finalizer, on the bucket and its secret.
	Finalizer = "extensions.gardener.cloud/backupbucket"
	// AnnotationGeneratedSecretNamespace says where the generated secret goes.
	AnnotationGeneratedSecretNamespace = "backupbucket.extensions.gardener.cloud/generated-secret-namespace"
	// DefaultGeneratedSecretNamespace is used without the annotation.
	DefaultGeneratedSecretNamespace = "garden"
	// GeneratedSecretPrefix starts the generated secret's name; the bucket name follows.
	GeneratedSecretPrefix = "generated-bucket-"
)

// Actuator creates and deletes buckets.
type Actuator struct {
	Client    client.Client
	Providers objectstore.Registry
}

// GeneratedSecretRef is where the generated secret of b lives.
func GeneratedSecretRef(b *extensionsv1alpha1.BackupBucket) corev1.SecretReference {
	ns := b.Annotations[AnnotationGeneratedSecretNamespace]
	if ns == "" {
		ns = DefaultGeneratedSecretNamespace
	}
	return corev1.SecretReference{Name: GeneratedSecretPrefix + b.Name, Namespace: ns}
}

// Reconcile creates the bucket (an existing one is fine) and writes the generated secret. With
// management credentials (an Azure service principal or workload identity) the provider first
// provisions what holds the bucket and hands back the storage credentials to use and publish.
func (a *Actuator) Reconcile(ctx context.Context, b *extensionsv1alpha1.BackupBucket, secret *corev1.Secret) (gardener.Reconciliation, error) {
	access, err := a.access(ctx, b, secret.Data)
	if err != nil {
		return gardener.Reconciliation{}, err
	}
	created, err := access.createBucket(ctx, b)
	if err != nil {
		return gardener.Reconciliation{}, gardener.FromStore(err)
	}
	if err := a.publish(ctx, b, created.secretData); err != nil {
		return gardener.Reconciliation{}, err
	}
	// Only once the new key is published: a crash before this leaves the annotation, and the
	// retry sees the rotation done (the published key is the newest) and does not rotate again.
	if err := a.removeAnnotations(ctx, b, created.consumed); err != nil {
		return gardener.Reconciliation{}, err
	}
	if len(created.notes) > 0 {
		return gardener.Reconciliation{Description: "Bucket reconciled: " + strings.Join(created.notes, "; ")}, nil
	}
	return gardener.Reconciliation{}, nil
}

// bucketAccess is how a bucket is reached: its provider with the spec.secretRef credentials
// and, when those are management credentials, the provisioner and what it needs.
type bucketAccess struct {
	provider    objectstore.Provider
	credentials map[string][]byte
	// provisioner is nil for storage credentials, which open the bucket as they are.
	provisioner  objectstore.Provisioner
	provisioning objectstore.Provisioning
}

// access is how b's bucket is reached with credentials.
func (a *Actuator) access(ctx context.Context, b *extensionsv1alpha1.BackupBucket, credentials map[string][]byte) (bucketAccess, error) {
	provider, err := a.provider(b)
	if err != nil {
		return bucketAccess{}, err
	}
	access := bucketAccess{provider: provider, credentials: credentials}
	pv, ok := objectstore.AsProvisioner(provider, credentials)
	if !ok {
		return access, nil
	}
	access.provisioner = pv
	access.provisioning, err = a.provisioning(ctx, b, credentials)
	return access, err
}

// createdBucket is what createBucket did: the data of the generated secret, the annotations a
// provisioner acted on, and what is worth telling.
type createdBucket struct {
	secretData map[string][]byte
	consumed   []string
	notes      []string
}

// createBucket creates b's bucket, provisioning what holds it first with management
// credentials. Every error it returns is the object store's.
func (ba bucketAccess) createBucket(ctx context.Context, b *extensionsv1alpha1.BackupBucket) (createdBucket, error) {
	var created createdBucket
	storage := ba.credentials
	var provisioned objectstore.Provisioned
	if ba.provisioner != nil {
		var err error
		if provisioned, err = ba.provisioner.Provision(ctx, ba.provisioning); err != nil {
			return created, fmt.Errorf("provisioning bucket %s: %w", b.Name, err)
		}
		storage, created.consumed = provisioned.Credentials, provisioned.Consumed
	}
	store, err := ba.provider.Open(b.Name, storage)
	if err != nil {
		return created, err
	}
	var note string
	if ba.provisioner != nil { // Provision applied the providerConfig's settings itself
		err = store.Create(ctx)
	} else {
		note, err = create(ctx, store, b)
	}
	if err != nil {
		return created, fmt.Errorf("creating bucket %s: %w", b.Name, err)
	}
	created.notes = slices.DeleteFunc([]string{provisioned.Description, note}, func(s string) bool { return s == "" })
	created.secretData, err = ba.provider.BackupSecretData(storage)
	return created, err
}

// deleteBucket deletes the bucket, and with management credentials what holds it. Every error
// it returns is the object store's.
func (ba bucketAccess) deleteBucket(ctx context.Context, bucket string) error {
	if ba.provisioner != nil {
		if err := ba.provisioner.Deprovision(ctx, ba.provisioning); err != nil {
			return fmt.Errorf("deleting bucket %s: %w", bucket, err)
		}
		return nil
	}
	store, err := ba.provider.Open(bucket, ba.credentials)
	if err != nil {
		return err
	}
	if err := store.Delete(ctx); err != nil {
		return fmt.Errorf("deleting bucket %s: %w", bucket, err)
	}
	return nil
}

// create creates the bucket with the settings of its providerConfig where the store takes
// them (object lock), and says what of them is worth telling.
func create(ctx context.Context, store objectstore.Store, b *extensionsv1alpha1.BackupBucket) (string, error) {
	c, ok := store.(objectstore.Configurable)
	if !ok {
		return "", store.Create(ctx)
	}
	return c.CreateWithConfig(ctx, gardener.ProviderConfig(b))
}

// publish writes the generated secret and records it in status.generatedSecretRef.
func (a *Actuator) publish(ctx context.Context, b *extensionsv1alpha1.BackupBucket, data map[string][]byte) error {
	ref := GeneratedSecretRef(b)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	_, err := controllerutil.CreateOrPatch(ctx, a.Client, secret, func() error {
		metav1.SetMetaDataLabel(&secret.ObjectMeta, gardener.LabelManagedBy, gardener.ManagedBy)
		secret.Type = corev1.SecretTypeOpaque
		if !maps.EqualFunc(secret.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) {
			secret.Data = data
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return gardener.Permanent(fmt.Errorf("namespace %s for the generated secret does not exist (annotation %s)", ref.Namespace, AnnotationGeneratedSecretNamespace),
			gardencorev1beta1.ErrorConfigurationProblem)
	}
	if err != nil {
		return fmt.Errorf("writing generated secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if current := b.Status.GeneratedSecretRef; current == nil || *current != ref {
		base := b.DeepCopy()
		b.Status.GeneratedSecretRef = &ref
		if err := a.Client.Status().Patch(ctx, b, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("recording status.generatedSecretRef: %w", err)
		}
	}
	return nil
}

// removeAnnotations removes the annotations a provisioner acted on.
func (a *Actuator) removeAnnotations(ctx context.Context, b *extensionsv1alpha1.BackupBucket, names []string) error {
	base := b.DeepCopy()
	removed := false
	for _, name := range names {
		if _, ok := b.Annotations[name]; ok {
			delete(b.Annotations, name)
			removed = true
		}
	}
	if !removed {
		return nil
	}
	if err := a.Client.Patch(ctx, b, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("removing annotations %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// Delete waits until no BackupEntry names the bucket, then deletes the bucket (and, with
// management credentials, what holds it) and the generated secret.
func (a *Actuator) Delete(ctx context.Context, b *extensionsv1alpha1.BackupBucket) (gardener.Deletion, error) {
	users, err := a.entriesUsing(ctx, b.Name)
	if err != nil {
		return gardener.Deletion{}, err
	}
	if len(users) > 0 {
		// Each of them publishes an event when it is gone, which brings us back here.
		return gardener.Deletion{}, gardener.Waiting(
			fmt.Errorf("BackupEntries still use bucket %s (live or waiting for their purge): %s", b.Name, strings.Join(users, ", ")),
			gardencorev1beta1.ErrorRetryableInfraDependencies)
	}
	credentials, err := gardener.ReadSecretData(ctx, a.Client, b.Spec.SecretRef)
	if err != nil {
		return gardener.Deletion{}, err
	}
	access, err := a.access(ctx, b, credentials)
	if err != nil {
		return gardener.Deletion{}, err
	}
	if err := access.deleteBucket(ctx, b.Name); err != nil {
		return gardener.Deletion{}, gardener.FromStore(err)
	}
	ref := publishedRef(b)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	if err := a.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return gardener.Deletion{}, fmt.Errorf("deleting generated secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return gardener.Deletion{}, nil
}

// publishedRef is the generated secret the status names (the annotation may have changed since
// it was written), or where it would be.
func publishedRef(b *extensionsv1alpha1.BackupBucket) corev1.SecretReference {
	if b.Status.GeneratedSecretRef != nil {
		return *b.Status.GeneratedSecretRef
	}
	return GeneratedSecretRef(b)
}

// provisioning is what a provisioner needs of b: the generated secret as published (nil if
// none yet), its providerConfig and annotations.
func (a *Actuator) provisioning(ctx context.Context, b *extensionsv1alpha1.BackupBucket, credentials map[string][]byte) (objectstore.Provisioning, error) {
	req := objectstore.Provisioning{Bucket: b.Name, Region: b.Spec.Region, Credentials: credentials, Annotations: b.Annotations, Config: gardener.ProviderConfig(b)}
	ref := publishedRef(b)
	secret := &corev1.Secret{}
	switch err := a.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return req, fmt.Errorf("reading generated secret %s/%s: %w", ref.Namespace, ref.Name, err)
	default:
		req.Published = secret.Data
	}
	return req, nil
}

// entriesUsing lists the BackupEntries whose spec.bucketName is bucket, deleting or not.
func (a *Actuator) entriesUsing(ctx context.Context, bucket string) ([]string, error) {
	list := &extensionsv1alpha1.BackupEntryList{}
	if err := a.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing BackupEntries: %w", err)
	}
	var names []string
	for _, e := range list.Items {
		if e.Spec.BucketName == bucket {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// provider is the provider of b's type, in b's region (it writes that region into the
// generated secret).
func (a *Actuator) provider(b *extensionsv1alpha1.BackupBucket) (objectstore.Provider, error) {
	p, err := a.Providers.Provider(objectstore.Where{Type: b.Spec.Type, Region: b.Spec.Region, Bucket: b.Name, Config: gardener.ProviderConfig(b)})
	return p, gardener.FromStore(err)
}
