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

// A RestoreDrill's spec the API server's validation refuses; one that bypassed it drills
// nothing rather than guessing.
var (
	errSelection = errors.New("choose the BackupEntries to drill with at most one of selector, purposes or all: true")
	errNothing   = errors.New("nothing to drill: choose BackupEntries with one of selector, purposes or all: true, EtcdBackupConfigs with configs, or both")
	errSource    = errors.New("source Copy or Both needs copyPolicy, and copyPolicy needs source Copy or Both")
)

// Selection is which BackupEntries and EtcdBackupConfigs a RestoreDrill drills, made from its
// spec once a run.
type Selection struct {
	entries  bool // the spec chooses entries
	all      bool
	purposes []string
	labels   labels.Selector // nil without spec.selector

	configs          bool // the spec chooses configs
	configNamespaces []string
	configLabels     labels.Selector // everything without spec.configs.selector
}

// Select makes the Selection of spec. It fails on a spec that chooses entries more than one
// way, or chooses nothing, or a copy without the policy that keeps it (or a policy without a
// copy), and on a selector the API server admits but labels cannot evaluate (an In without
// values).
func Select(spec backupv1alpha1.RestoreDrillSpec) (Selection, error) {
	chosen := 0
	for _, set := range []bool{spec.Selector != nil, len(spec.Purposes) > 0, spec.All} {
		if set {
			chosen++
		}
	}
	switch {
	case chosen > 1:
		return Selection{}, errSelection
	case chosen == 0 && spec.Configs == nil:
		return Selection{}, errNothing
	case (spec.Source == backupv1alpha1.DrillCopy || spec.Source == backupv1alpha1.DrillBoth) != (spec.CopyPolicy != ""):
		return Selection{}, errSource
	}
	s := Selection{entries: chosen == 1, all: spec.All, purposes: spec.Purposes}
	if spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
		if err != nil {
			return Selection{}, fmt.Errorf("selector: %w", err)
		}
		s.labels = sel
	}
	if c := spec.Configs; c != nil {
		s.configs, s.configNamespaces, s.configLabels = true, c.Namespaces, labels.Everything()
		if c.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(c.Selector)
			if err != nil {
				return Selection{}, fmt.Errorf("configs.selector: %w", err)
			}
			s.configLabels = sel
		}
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
	case !s.entries || e.DeletionTimestamp != nil || gardener.IsSourceEntry(e.Name):
		return false
	case s.all:
		return true
	case s.labels != nil:
		return s.labels.Matches(labels.Set(e.Labels))
	default:
		return slices.Contains(s.purposes, purpose)
	}
}

// Entries says whether the drill chooses BackupEntries at all; Configs whether it chooses
// EtcdBackupConfigs: a run lists only the kinds it drills.
func (s Selection) Entries() bool { return s.entries }
func (s Selection) Configs() bool { return s.configs }

// SelectsConfig says whether cfg's backups are drilled. A config being deleted is not: its
// backups are left as they are.
func (s Selection) SelectsConfig(cfg *backupv1alpha1.EtcdBackupConfig) bool {
	if !s.configs || cfg.DeletionTimestamp != nil {
		return false
	}
	if len(s.configNamespaces) > 0 && !slices.Contains(s.configNamespaces, cfg.Namespace) {
		return false
	}
	return s.configLabels.Matches(labels.Set(cfg.Labels))
}
