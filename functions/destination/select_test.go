package destination

import (
	"strings"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Each criterion given narrows the buckets: names, types and labels must all match.
func TestSelectBuckets(t *testing.T) {
	bucket := func(name, typ string, labels map[string]string) *extensionsv1alpha1.BackupBucket {
		return &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: typ}}}
	}
	a := bucket("a", "azure", map[string]string{"copy": "yes"})
	b := bucket("b", "aws", map[string]string{"copy": "yes"})
	c := bucket("c", "azure", nil)
	for _, tc := range []struct {
		name string
		sel  backupv1alpha1.BucketSelection
		want string
	}{
		{"nothing chosen", backupv1alpha1.BucketSelection{}, ""},
		{"names", backupv1alpha1.BucketSelection{Names: []string{"a", "c"}}, "ac"},
		{"types", backupv1alpha1.BucketSelection{Types: []string{"azure"}}, "ac"},
		{"labels", backupv1alpha1.BucketSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}}, "ab"},
		{"types and labels", backupv1alpha1.BucketSelection{Types: []string{"azure"},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}}, "a"},
		{"names and types", backupv1alpha1.BucketSelection{Names: []string{"b", "c"}, Types: []string{"aws"}}, "b"},
	} {
		sel, err := Select(tc.sel)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got strings.Builder
		for _, bk := range []*extensionsv1alpha1.BackupBucket{a, b, c} {
			if sel.SelectsBucket(bk) {
				got.WriteString(bk.Name)
			}
		}
		if got.String() != tc.want {
			t.Errorf("%s: selects %q, want %q", tc.name, got.String(), tc.want)
		}
	}
	if _, err := Select(backupv1alpha1.BucketSelection{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "copy", Operator: metav1.LabelSelectorOpIn}}}}); err == nil {
		t.Error("an In without values is selected by")
	}
}
