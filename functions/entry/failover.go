// The fail-over of an entry's etcd-backup to a BackupCopyPolicy's destination: while the policy
// has failed over the entry's bucket, etcd-backup names the destination's bucket and holds its
// credentials, so that etcd-backup-restore backs up into the copy and restores from it.

package entry

import (
	"context"
	"fmt"
	"maps"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// failOver is what e's etcd-backup holds while p has failed over e's bucket: the destination's
// credentials (its endpoint among them), its bucket as bucketName, and what the provider adds
// for the destination's region. A destination of another provider type than e's cannot be
// followed (gardenlet deploys etcd-backup-restore with the seed's backup provider and takes only
// the bucket from the secret): then data is nil and why says so; the secret keeps the bucket.
func (a *Actuator) failOver(ctx context.Context, e *extensionsv1alpha1.BackupEntry, p *backupv1alpha1.BackupCopyPolicy) (data map[string][]byte, why string, err error) {
	dest, where, credentials, err := destination.Read(ctx, a.Client, p.Spec.Destination)
	if err != nil {
		return nil, "", fmt.Errorf("BackupCopyPolicy %s has failed over to BackupDestination %s: %w", p.Name, p.Spec.Destination, err)
	}
	if dest.Spec.Type != e.Spec.Type {
		return nil, fmt.Sprintf("BackupCopyPolicy %s has failed over to BackupDestination %s, of type %s; this entry's etcd is backed up with the seed's provider, %s: etcd-backup keeps the bucket (restore from the copy by hand)",
			p.Name, dest.Name, dest.Spec.Type, e.Spec.Type), nil
	}
	data = maps.Clone(credentials)
	data[DataKeyBucketName] = []byte(where.Bucket)
	if ep, ok := a.Providers[where.Type].(objectstore.EntrySecret); ok {
		extra, err := ep.EntrySecretData(objectstore.Entry{Region: where.Region})
		if err != nil {
			return nil, "", fmt.Errorf("BackupDestination %s: %w", dest.Name, gardener.FromStore(err))
		}
		maps.Copy(data, extra)
	}
	return data, "", nil
}

// failedOverDescription is the success description of an entry whose etcd-backup points at
// the destination of p.
func failedOverDescription(p *backupv1alpha1.BackupCopyPolicy) string {
	return fmt.Sprintf("BackupEntry reconciled; etcd-backup points at BackupDestination %s: BackupCopyPolicy %s has failed over its buckets", p.Spec.Destination, p.Name)
}
