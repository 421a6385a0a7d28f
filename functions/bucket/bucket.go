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

// Reconcile creates the bucket (an existing one is fine) and writes the generated secret.
func (a *Actuator) Reconcile(ctx context.Context, obj extensionsv1alpha1.Object, credentials map[string][]byte) (gardener.Reconciliation, error) {
	return gardener.Reconciliation{}, a.reconcile(ctx, obj.(*extensionsv1alpha1.BackupBucket), credentials)
}

func (a *Actuator) reconcile(ctx context.Context, b *extensionsv1alpha1.BackupBucket, credentials map[string][]byte) error {
	provider, store, err := a.open(b, credentials)
	if err != nil {
		return err
	}
	if err := store.Create(ctx); err != nil {
		return gardener.StoreError(fmt.Errorf("creating bucket %s: %w", b.Name, err))
	}
	data, err := provider.BackupSecretData(credentials)
	if err != nil {
		return gardener.StoreError(err)
	}
	ref := GeneratedSecretRef(b)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	_, err = controllerutil.CreateOrPatch(ctx, a.Client, secret, func() error {
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

// Delete waits until no BackupEntry names the bucket, then deletes the bucket and the
// generated secret.
func (a *Actuator) Delete(ctx context.Context, obj extensionsv1alpha1.Object) (gardener.Deletion, error) {
	b := obj.(*extensionsv1alpha1.BackupBucket)
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
	_, store, err := a.open(b, credentials)
	if err != nil {
		return gardener.Deletion{}, err
	}
	if err := store.Delete(ctx); err != nil {
		return gardener.Deletion{}, gardener.StoreError(fmt.Errorf("deleting bucket %s: %w", b.Name, err))
	}
	// The secret the status names: the annotation may have changed since it was written.
	ref := GeneratedSecretRef(b)
	if b.Status.GeneratedSecretRef != nil {
		ref = *b.Status.GeneratedSecretRef
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}}
	if err := a.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return gardener.Deletion{}, fmt.Errorf("deleting generated secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return gardener.Deletion{}, nil
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

// open opens the bucket's store with the credentials of spec.secretRef, in spec.region for a
// provider whose buckets have one. The provider it returns writes that region into the
// generated secret.
func (a *Actuator) open(b *extensionsv1alpha1.BackupBucket, credentials map[string][]byte) (objectstore.Provider, objectstore.Store, error) {
	provider, store, err := a.Providers.Open(objectstore.Where{Type: b.Spec.Type, Region: b.Spec.Region, Bucket: b.Name}, credentials)
	return provider, store, gardener.StoreError(err)
}
