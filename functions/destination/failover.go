package destination

import (
	"context"
	"errors"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// ErrFailOverAmbiguous: more than one BackupCopyPolicy has failed over an entry's bucket, each
// to its own destination; the entry's etcd-backup is left as it is until one remains.
var ErrFailOverAmbiguous = errors.New("more than one BackupCopyPolicy fails over the entry's bucket")

// FailOverOf returns the BackupCopyPolicy that has failed over be's bucket (its FailedOver: the
// entry's etcd-backup is to point at its destination), or nil. A control-plane migration's
// source- entry has none: its secret names the source seed's bucket. Where the
// BackupCopyPolicy CRD is not installed there is none.
func FailOverOf(ctx context.Context, c client.Reader, be *extensionsv1alpha1.BackupEntry) (*backupv1alpha1.BackupCopyPolicy, error) {
	if gardener.IsSourceEntry(be.Name) {
		return nil, nil
	}
	policies := &backupv1alpha1.BackupCopyPolicyList{}
	switch err := c.List(ctx, policies); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing BackupCopyPolicies: %w", err)
	}
	var found []*backupv1alpha1.BackupCopyPolicy
	var bucket *extensionsv1alpha1.BackupBucket
	read := false
	for i := range policies.Items {
		p := &policies.Items[i]
		if !p.FailedOver() {
			continue
		}
		if !read {
			var err error
			if bucket, err = readBucket(ctx, c, be.Spec.BucketName); err != nil {
				return nil, err
			}
			read = true
		}
		if selects(p, bucket) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	default:
		return nil, fmt.Errorf("%w: %s and %s", ErrFailOverAmbiguous, found[0].Name, found[1].Name)
	}
}
