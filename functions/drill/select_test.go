package drill

import (
	"strings"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Which entries a RestoreDrill drills, row by row: each way of choosing, and the entries no
// choice drills.
func TestSelects(t *testing.T) {
	const name = "shoot--dev--app--6f1c"
	var (
		all       = backupv1alpha1.RestoreDrillSpec{All: true}
		byPurpose = backupv1alpha1.RestoreDrillSpec{Purposes: []string{"production", "infrastructure"}}
		byLabels  = backupv1alpha1.RestoreDrillSpec{Selector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"tier": "gold"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "drill", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"skip"}}},
		}}
		everything = backupv1alpha1.RestoreDrillSpec{Selector: &metav1.LabelSelector{}}
	)
	entry := func(name string, labels map[string]string, deleting bool) *extensionsv1alpha1.BackupEntry {
		e := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if deleting {
			e.DeletionTimestamp = &metav1.Time{}
		}
		return e
	}
	gold := map[string]string{"tier": "gold"}
	for _, tc := range []struct {
		name    string
		spec    backupv1alpha1.RestoreDrillSpec
		entry   *extensionsv1alpha1.BackupEntry
		purpose string
		want    bool
	}{
		{name: "all: any entry", spec: all, entry: entry(name, nil, false), want: true},
		{name: "all: an entry of unknown purpose", spec: all, entry: entry("etcd-backups", nil, false), want: true},
		{name: "all: not one being deleted", spec: all, entry: entry(name, nil, true)},
		{name: "all: not a migration's source- entry", spec: all, entry: entry("source-"+name, nil, false)},

		{name: "purposes: one listed", spec: byPurpose, entry: entry(name, nil, false), purpose: "production", want: true},
		{name: "purposes: the other listed", spec: byPurpose, entry: entry(name, nil, false), purpose: "infrastructure", want: true},
		{name: "purposes: one not listed", spec: byPurpose, entry: entry(name, nil, false), purpose: "evaluation"},
		{name: "purposes: unknown is none", spec: byPurpose, entry: entry(name, nil, false)},
		{name: "purposes: labels do not count", spec: byPurpose, entry: entry(name, map[string]string{"shoot.gardener.cloud/purpose": "production"}, false)},
		{name: "purposes: not one being deleted", spec: byPurpose, entry: entry(name, nil, true), purpose: "production"},

		{name: "selector: labels match", spec: byLabels, entry: entry(name, gold, false), want: true},
		{name: "selector: a label missing", spec: byLabels, entry: entry(name, map[string]string{"tier": "silver"}, false)},
		{name: "selector: an expression excludes", spec: byLabels, entry: entry(name, map[string]string{"tier": "gold", "drill": "skip"}, false)},
		{name: "selector: the purpose does not count", spec: byLabels, entry: entry(name, nil, false), purpose: "production"},
		{name: "selector: not one being deleted", spec: byLabels, entry: entry(name, gold, true)},
		{name: "selector: empty selects every entry", spec: everything, entry: entry(name, nil, false), want: true},

		{name: "configs alone: no entry", spec: backupv1alpha1.RestoreDrillSpec{Configs: &backupv1alpha1.ConfigSelection{}}, entry: entry(name, nil, false)},
		{name: "all and configs: every entry", spec: backupv1alpha1.RestoreDrillSpec{All: true, Configs: &backupv1alpha1.ConfigSelection{}}, entry: entry(name, nil, false), want: true},
	} {
		s, err := Select(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.Selects(tc.entry, tc.purpose); got != tc.want {
			t.Errorf("%s: selects %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Specs the API server refuses select nothing: Select says why instead.
func TestSelectRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec backupv1alpha1.RestoreDrillSpec
		want string
	}{
		{name: "none", spec: backupv1alpha1.RestoreDrillSpec{}, want: "nothing to drill"},
		{name: "two", spec: backupv1alpha1.RestoreDrillSpec{All: true, Purposes: []string{"production"}}, want: "at most one of selector, purposes or all"},
		{name: "two, and configs", spec: backupv1alpha1.RestoreDrillSpec{All: true, Purposes: []string{"production"}, Configs: &backupv1alpha1.ConfigSelection{}},
			want: "at most one of selector, purposes or all"},
		{name: "a config selector's In without values", spec: backupv1alpha1.RestoreDrillSpec{Configs: &backupv1alpha1.ConfigSelection{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}}}, want: "configs.selector: "},
		{name: "a copy without its policy", spec: backupv1alpha1.RestoreDrillSpec{All: true, Source: backupv1alpha1.DrillCopy}, want: "needs copyPolicy"},
		{name: "both without a policy", spec: backupv1alpha1.RestoreDrillSpec{All: true, Source: backupv1alpha1.DrillBoth}, want: "needs copyPolicy"},
		{name: "a policy, the bucket drilled", spec: backupv1alpha1.RestoreDrillSpec{All: true, CopyPolicy: "p"}, want: "copyPolicy needs source Copy or Both"},
		{name: "an In without values", spec: backupv1alpha1.RestoreDrillSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}}, want: "selector: "},
	} {
		if _, err := Select(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// Which EtcdBackupConfigs a RestoreDrill drills, row by row.
func TestSelectsConfig(t *testing.T) {
	config := func(namespace string, labels map[string]string, deleting bool) *backupv1alpha1.EtcdBackupConfig {
		c := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "main", Labels: labels}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		return c
	}
	gold := map[string]string{"tier": "gold"}
	var (
		entriesOnly = backupv1alpha1.RestoreDrillSpec{All: true}
		every       = backupv1alpha1.RestoreDrillSpec{Configs: &backupv1alpha1.ConfigSelection{}}
		ofTeams     = backupv1alpha1.RestoreDrillSpec{Configs: &backupv1alpha1.ConfigSelection{Namespaces: []string{"team-a", "team-b"}}}
		goldOfTeamA = backupv1alpha1.RestoreDrillSpec{Configs: &backupv1alpha1.ConfigSelection{Namespaces: []string{"team-a"},
			Selector: &metav1.LabelSelector{MatchLabels: gold}}}
	)
	for _, tc := range []struct {
		name   string
		spec   backupv1alpha1.RestoreDrillSpec
		config *backupv1alpha1.EtcdBackupConfig
		want   bool
	}{
		{name: "entries only: no config", spec: entriesOnly, config: config("team-a", nil, false)},
		{name: "empty: any config", spec: every, config: config("team-a", nil, false), want: true},
		{name: "empty: not one being deleted", spec: every, config: config("team-a", nil, true)},
		{name: "namespaces: one listed", spec: ofTeams, config: config("team-b", nil, false), want: true},
		{name: "namespaces: one not listed", spec: ofTeams, config: config("team-c", gold, false)},
		{name: "namespace and labels: both match", spec: goldOfTeamA, config: config("team-a", gold, false), want: true},
		{name: "namespace and labels: a label missing", spec: goldOfTeamA, config: config("team-a", nil, false)},
		{name: "namespace and labels: another namespace", spec: goldOfTeamA, config: config("team-b", gold, false)},
	} {
		s, err := Select(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.SelectsConfig(tc.config); got != tc.want {
			t.Errorf("%s: selects %v, want %v", tc.name, got, tc.want)
		}
	}
}
