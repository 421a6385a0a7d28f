package destination_test

import (
	"context"
	"fmt"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// The destinations holding an entry's copies: every policy's whose selection includes the
// entry's bucket, or whose status lists the entry (its selection changed since), one per
// destination with its policies; none for a bucket no policy selects, nor for a source- entry,
// whose prefix holds the live entry's copies. The BackupBucket is read once, and only when a
// policy's selection is to be judged.
func TestCopiesOf(t *testing.T) {
	const name = "shoot--dev--a--1"
	policy := func(name, dest string, sel backupv1alpha1.BucketSelection, copied ...string) *backupv1alpha1.BackupCopyPolicy {
		p := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: sel, Destination: dest, Schedule: "@daily"}}
		for _, e := range copied {
			p.Status.Results = append(p.Status.Results, backupv1alpha1.EntryCopyResult{Entry: e, Bucket: "old"})
		}
		return p
	}
	shoots := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "shoots", Labels: map[string]string{"copy": "yes"}},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}}}
	objs := []client.Object{
		policy("by-name", "second", backupv1alpha1.BucketSelection{Names: []string{"shoots"}}),
		policy("by-label", "second", backupv1alpha1.BucketSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}}),
		policy("other-type", "third", backupv1alpha1.BucketSelection{Types: []string{"aws"}}),
		policy("copied-before", "fourth", backupv1alpha1.BucketSelection{Names: []string{"elsewhere"}}, name),
		policy("copied-another", "fifth", backupv1alpha1.BucketSelection{Names: []string{"elsewhere"}}, "shoot--dev--b--2"),
	}
	other := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "gcp"}}}
	for _, tc := range []struct {
		name     string
		entry    string
		bucket   string
		policies []client.Object
		want     string
		gets     int // BackupBucket reads
	}{
		{"selected and copied before", name, "shoots", objs, "[{fourth [copied-before]} {second [by-label by-name]}]", 1},
		{"no BackupBucket: what the statuses list", name, "gone", objs, "[{fourth [copied-before]}]", 1},
		{"a bucket no policy selects", name, "other", objs, "[{fourth [copied-before]}]", 1},
		{"no policy: the bucket not read", name, "shoots", nil, "[]", 0},
		{"every policy lists the entry: the bucket not read", name, "shoots", objs[3:4], "[{fourth [copied-before]}]", 0},
		{"source- entry: none", gardener.SourcePrefix + name, "shoots", objs, "[]", 0},
	} {
		gets := 0
		c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(append([]client.Object{shoots, other}, tc.policies...)...).
			WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				gets++
				return c.Get(ctx, key, obj, opts...)
			}}).Build()
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: tc.entry}, Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: tc.bucket}}
		copies, err := destination.CopiesOf(t.Context(), c, be)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(copies); got != tc.want || gets != tc.gets {
			t.Errorf("%s: %s, %d reads of the bucket; want %s, %d", tc.name, got, gets, tc.want, tc.gets)
		}
	}

	// An installation without housekeeper's CRDs (etcdBackupConfig.enabled off): no copies, and
	// the purge of the bucket goes on.
	gk := backupv1alpha1.SchemeGroupVersion.WithKind("BackupCopyPolicy").GroupKind()
	for _, notServed := range []error{&meta.NoKindMatchError{GroupKind: gk}, apierrors.NewNotFound(backupv1alpha1.SchemeGroupVersion.WithResource("backupcopypolicies").GroupResource(), "")} {
		c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithInterceptorFuncs(interceptor.Funcs{
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return notServed
			},
		}).Build()
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: "shoots"}}
		if copies, err := destination.CopiesOf(t.Context(), c, be); err != nil || copies != nil {
			t.Errorf("BackupCopyPolicies not served (%v): %v, %v; want none and no error", notServed, copies, err)
		}
	}
}
