package drill

import (
	"errors"
	"fmt"
	"slices"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// errSelection: a RestoreDrill's spec that does not pick its entries with exactly one of
// selector, purposes or all, which the API server's validation refuses; a spec that bypassed it
// drills nothing rather than guessing.
var errSelection = errors.New("choose the entries to drill with exactly one of selector, purposes or all: true")

// Selection is which BackupEntries a RestoreDrill drills, made from its spec once a run.
type Selection struct {
	all      bool
	purposes []string
	labels   labels.Selector // nil without spec.selector
}

// Select makes the Selection of spec. It fails on a spec that does not choose with exactly one
// of selector, purposes or all, and on a selector the API server admits but labels cannot
// evaluate (an In without values).
func Select(spec backupv1alpha1.RestoreDrillSpec) (Selection, error) {
	chosen := 0
	for _, set := range []bool{spec.Selector != nil, len(spec.Purposes) > 0, spec.All} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return Selection{}, errSelection
	}
	s := Selection{all: spec.All, purposes: spec.Purposes}
	if spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil {
			return Selection{}, fmt.Errorf("selector: %w", err)
		}
		s.labels = sel
	}
	return s, nil
}

// Selects says whether e is drilled; purpose is its shoot's (entry.ShootPurpose), "" when
// unknown, which no purposes select. An entry being deleted is never drilled: its shoot is
// gone and its backups wait for the purge. Nor is a control-plane migration's source- entry:
// its backups are the shoot's, copied to the destination's bucket and drilled there under the
// entry without source-.
func (s Selection) Selects(e *extensionsv1alpha1.BackupEntry, purpose string) bool {
	switch {
	case e.DeletionTimestamp != nil || gardener.IsSourceEntry(e.Name):
		return false
	case s.all:
		return true
	case s.labels != nil:
		return s.labels.Matches(labels.Set(e.Labels))
	default:
		return slices.Contains(s.purposes, purpose)
	}
}
