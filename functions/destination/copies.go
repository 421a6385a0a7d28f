package destination

import (
	"context"
	"fmt"
	"maps"
	"slices"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// Copy is a BackupDestination that holds, or may hold, copies of an entry's backups, under the
// entry's prefix, and the BackupCopyPolicies that copy them there.
type Copy struct {
	Destination string
	Policies    []string
}

// CopiesOf returns the BackupDestinations that hold copies of the backups of be, by name: the
// destination of every BackupCopyPolicy (deleting or not) whose selection includes be's
// BackupBucket (read only when some policy's selection is to be judged; none when it is gone),
// or whose status lists be among its results (the selection may have changed since it copied
// be). A source- entry has none: the copy function
// never copies one, and its prefix holds the copies of the live entry without source-. A policy
// deleted takes its claim with it: its copies are no longer housekeeper's. Where the
// BackupCopyPolicy CRD is not installed (etcdBackupConfig.enabled off) there are none.
func CopiesOf(ctx context.Context, c client.Reader, be *extensionsv1alpha1.BackupEntry) ([]Copy, error) {
	if gardener.IsSourceEntry(be.Name) {
		return nil, nil
	}
	policies := &backupv1alpha1.BackupCopyPolicyList{}
	switch err := c.List(ctx, policies); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, nil // the kind is not served: an installation without the CRDs has no copies
	case err != nil:
		return nil, fmt.Errorf("listing BackupCopyPolicies: %w", err)
	}
	byDestination := map[string][]string{}
	var bucket *extensionsv1alpha1.BackupBucket
	read := false
	for i := range policies.Items {
		p := &policies.Items[i]
		if !listed(p, be) {
			if !read {
				var err error
				if bucket, err = readBucket(ctx, c, be.Spec.BucketName); err != nil {
					return nil, err
				}
				read = true
			}
			if !selects(p, bucket) {
				continue
			}
		}
		byDestination[p.Spec.Destination] = append(byDestination[p.Spec.Destination], p.Name)
	}
	copies := make([]Copy, 0, len(byDestination))
	for _, name := range slices.Sorted(maps.Keys(byDestination)) {
		copies = append(copies, Copy{Destination: name, Policies: slices.Sorted(slices.Values(byDestination[name]))})
	}
	return copies, nil
}

// listed says whether p's status lists be among the entries it copied.
func listed(p *backupv1alpha1.BackupCopyPolicy, be *extensionsv1alpha1.BackupEntry) bool {
	return slices.ContainsFunc(p.Status.Results, func(r backupv1alpha1.EntryCopyResult) bool { return r.Entry == be.Name })
}

// selects says whether p selects bucket (nil: none).
func selects(p *backupv1alpha1.BackupCopyPolicy, bucket *extensionsv1alpha1.BackupBucket) bool {
	if bucket == nil {
		return false
	}
	// A selector labels cannot evaluate selects nothing: the copy function copied nothing with it.
	sel, err := Select(p.Spec.Buckets)
	return err == nil && sel.SelectsBucket(bucket)
}

// readBucket reads the named BackupBucket; nil when there is none.
func readBucket(ctx context.Context, c client.Reader, name string) (*extensionsv1alpha1.BackupBucket, error) {
	bucket := &extensionsv1alpha1.BackupBucket{}
	switch err := c.Get(ctx, client.ObjectKey{Name: name}, bucket); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading BackupBucket %s: %w", name, err)
	}
	return bucket, nil
}
