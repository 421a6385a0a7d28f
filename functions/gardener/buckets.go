package gardener

import (
	"context"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Buckets opens BackupEntries' buckets: the purge, the drill and the copy open them the same way.
type Buckets struct {
	Client    client.Reader
	Providers objectstore.Registry
}

// Open opens the entry's bucket. A source- entry's bucket belongs to the source seed: it is
// opened, as upstream does, with the entry's own spec.type, spec.region and spec.secretRef. Any
// other entry uses its BackupBucket's credentials, so that a purge works even when the entry's
// own secret is gone (gardener#2557), and its own secret when this seed has no such
// BackupBucket. A bucket whose secret holds management credentials (an Azure service principal)
// is opened with the storage credentials it published, its generated secret. An absent
// BackupBucket object never means the backups are gone: only the store can say that.
func (b Buckets) Open(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Store, error) {
	w, credentials, err := b.Credentials(ctx, be)
	if err != nil {
		return nil, err
	}
	_, store, err := b.Providers.Open(w, credentials)
	return store, FromStore(err)
}

// Credentials is where the entry's bucket is and the credentials Open opens it with, chosen
// as Open chooses them; the drill hands the same to etcd-backup-restore's restore.
func (b Buckets) Credentials(ctx context.Context, be *extensionsv1alpha1.BackupEntry) (objectstore.Where, map[string][]byte, error) {
	if IsSourceEntry(be.Name) {
		return b.with(ctx, be, be.Spec.Type, be.Spec.Region, be.Spec.SecretRef)
	}
	bucket := &extensionsv1alpha1.BackupBucket{}
	switch err := b.Client.Get(ctx, client.ObjectKey{Name: be.Spec.BucketName}, bucket); {
	case err == nil:
		return b.bucketCredentials(ctx, be, bucket)
	case !apierrors.IsNotFound(err):
		return objectstore.Where{}, nil, fmt.Errorf("reading BackupBucket %s: %w", be.Spec.BucketName, err)
	}
	return b.with(ctx, be, be.Spec.Type, be.Spec.Region, be.Spec.SecretRef)
}

// OpenWith opens be's bucket with the credentials of bucket, its BackupBucket.
func (b Buckets) OpenWith(ctx context.Context, be *extensionsv1alpha1.BackupEntry, bucket *extensionsv1alpha1.BackupBucket) (objectstore.Store, error) {
	w, credentials, err := b.bucketCredentials(ctx, be, bucket)
	if err != nil {
		return nil, err
	}
	_, store, err := b.Providers.Open(w, credentials)
	return store, FromStore(err)
}

// bucketCredentials are the BackupBucket's credentials for be's bucket, or its generated
// secret's when those are management credentials.
func (b Buckets) bucketCredentials(ctx context.Context, be *extensionsv1alpha1.BackupEntry, bucket *extensionsv1alpha1.BackupBucket) (objectstore.Where, map[string][]byte, error) {
	w := objectstore.Where{Type: bucket.Spec.Type, Region: bucket.Spec.Region, Bucket: be.Spec.BucketName, Config: ProviderConfig(bucket)}
	provider, err := b.Providers.Provider(w)
	if err != nil {
		return w, nil, FromStore(err) // before reading a secret that would not help
	}
	credentials, err := ReadSecretData(ctx, b.Client, bucket.Spec.SecretRef)
	if err != nil {
		return w, nil, err
	}
	if _, manages := objectstore.AsProvisioner(provider, credentials); manages {
		ref := bucket.Status.GeneratedSecretRef
		if ref == nil {
			ref = &be.Spec.SecretRef // not published yet: the entry's copy is all there is
		}
		if credentials, err = ReadSecretData(ctx, b.Client, *ref); err != nil {
			return w, nil, err
		}
	}
	return w, credentials, nil
}

// with is be's bucket with the provider, region and credentials given.
func (b Buckets) with(ctx context.Context, be *extensionsv1alpha1.BackupEntry, providerType, region string, secretRef corev1.SecretReference) (objectstore.Where, map[string][]byte, error) {
	w := objectstore.Where{Type: providerType, Region: region, Bucket: be.Spec.BucketName, Config: ProviderConfig(be)}
	if _, err := b.Providers.Get(providerType); err != nil {
		return w, nil, FromStore(err) // before reading a secret that would not help
	}
	credentials, err := ReadSecretData(ctx, b.Client, secretRef)
	if err != nil {
		return w, nil, err
	}
	return w, credentials, nil
}
