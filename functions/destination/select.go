package destination

import (
	"fmt"
	"slices"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// Selection is which BackupBuckets a BackupCopyPolicy copies the entries of, made from its spec
// once a run. Each criterion set narrows it; none set selects nothing (the API server refuses
// such a policy).
type Selection struct {
	names  []string
	types  []string
	labels labels.Selector // nil without buckets.selector
}

// Select makes the Selection of spec. It fails on a selector the API server admits but labels
// cannot evaluate (an In without values).
func Select(spec backupv1alpha1.BucketSelection) (Selection, error) {
	s := Selection{names: spec.Names, types: spec.Types}
	if spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil {
			return Selection{}, fmt.Errorf("buckets.selector: %w", err)
		}
		s.labels = sel
	}
	return s, nil
}

// SelectsBucket says whether b's entries are copied.
func (s Selection) SelectsBucket(b *extensionsv1alpha1.BackupBucket) bool {
	switch {
	case s.names == nil && s.types == nil && s.labels == nil:
		return false
	case s.names != nil && !slices.Contains(s.names, b.Name):
		return false
	case s.types != nil && !slices.Contains(s.types, b.Spec.Type):
		return false
	case s.labels != nil && !s.labels.Matches(labels.Set(b.Labels)):
		return false
	}
	return true
}

// SelectsEntry says whether e's backups are copied, its bucket being selected. An entry being
// deleted is not: its backups wait for their purge. Nor is a control-plane migration's source-
// entry: its backups are in the source seed's bucket, and are the shoot's, copied under the
// entry without source-.
func SelectsEntry(e *extensionsv1alpha1.BackupEntry) bool {
	return e.DeletionTimestamp == nil && !gardener.IsSourceEntry(e.Name)
}
