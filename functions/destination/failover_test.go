package destination_test

import (
	"errors"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// The policy that has failed over an entry's bucket: one that selects the bucket with
// spec.failOver set, or whose return is not done (status.failOver); none for a policy not failed
// over, one that selects another bucket, or a source- entry; two at once are an error naming
// both.
func TestFailOverOf(t *testing.T) {
	const name = "shoot--dev--a--1"
	policy := func(name string, bucket string, spec bool, returning bool) *backupv1alpha1.BackupCopyPolicy {
		p := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{bucket}},
				Destination: name, Schedule: "@daily", FailOver: spec}}
		if returning {
			p.Status.FailOver = &backupv1alpha1.FailOverStatus{Phase: backupv1alpha1.FailOverReturning}
		}
		return p
	}
	shoots := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "shoots"}}
	for _, tc := range []struct {
		name     string
		entry    string
		policies []client.Object
		want     string
		err      error
	}{
		{"none failed over", name, []client.Object{policy("copy", "shoots", false, false)}, "", nil},
		{"failed over", name, []client.Object{policy("copy", "shoots", false, false), policy("over", "shoots", true, false)}, "over", nil},
		{"returning", name, []client.Object{policy("back", "shoots", false, true)}, "back", nil},
		{"another bucket failed over", name, []client.Object{policy("elsewhere", "other", true, false)}, "", nil},
		{"source- entry", gardener.SourcePrefix + name, []client.Object{policy("over", "shoots", true, false)}, "", nil},
		{"two", name, []client.Object{policy("one", "shoots", true, false), policy("two", "shoots", false, true)}, "", destination.ErrFailOverAmbiguous},
	} {
		c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(append([]client.Object{shoots}, tc.policies...)...).Build()
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: tc.entry}, Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: "shoots"}}
		p, err := destination.FailOverOf(t.Context(), c, be)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}
