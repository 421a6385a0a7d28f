package entry_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	securityv1alpha1constants "github.com/gardener/gardener/pkg/apis/security/v1alpha1/constants"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// An entry whose secret is a workload identity's, as gardenlet writes it: etcd-backup carries
// config, the role etcd-backup-restore assumes, the region and bucketName, and the marks that
// make gardenlet's token requestor fill its token. The token the requestor writes survives
// housekeeper's later reconciles; a switch back to static credentials clears the marks and the
// token (gardener#13282); a secret marked as a workload identity's without its annotations is
// a configuration problem.
func TestWorkloadIdentityEntrySecret(t *testing.T) {
	p := pipeline.Start(t)
	p.RunFunction(entry.Definition, objectstore.NewRegistry(s3.New()))
	f := &fixture{Pipeline: p}
	ctx := context.Background()
	const name, namespace = "shoot--dev--wi--7d2e", "shoot--dev--wi"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	const roleARN = "arn:aws:iam::123456789012:role/etcd-backup"
	wiSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "entry-" + name, Namespace: "garden",
			Labels: map[string]string{
				securityv1alpha1constants.LabelPurpose:                  securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor,
				securityv1alpha1constants.LabelWorkloadIdentityProvider: "aws",
			},
			Annotations: map[string]string{
				securityv1alpha1constants.AnnotationWorkloadIdentityName:          "seed-backup",
				securityv1alpha1constants.AnnotationWorkloadIdentityNamespace:     "garden",
				securityv1alpha1constants.AnnotationWorkloadIdentityContextObject: `{"kind":"BackupEntry","apiVersion":"core.gardener.cloud/v1beta1","name":"` + name + `"}`,
			},
		},
		Data: map[string][]byte{
			entry.KeyConfig: []byte("apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1\nkind: WorkloadIdentityConfig\nroleARN: " + roleARN + "\n"),
			"ignored":       []byte("not copied"),
		},
	}
	f.create(wiSecret)
	be := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type}, BucketName: bucketName, Region: "eu-west-1",
			SecretRef: corev1.SecretReference{Name: wiSecret.Name, Namespace: "garden"},
		},
	}
	f.create(be)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)

	read := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: entry.SecretName}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := read()
	if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, []string{entry.DataKeyBucketName, entry.KeyConfig, s3.KeyRegion, s3.KeyRoleARN}) {
		t.Fatalf("etcd-backup data keys %v: want bucketName, config, region, roleARN", got)
	}
	if string(s.Data[s3.KeyRoleARN]) != roleARN || string(s.Data[s3.KeyRegion]) != "eu-west-1" {
		t.Errorf("roleARN %q region %q", s.Data[s3.KeyRoleARN], s.Data[s3.KeyRegion])
	}
	for k, v := range wiSecret.Labels {
		if s.Labels[k] != v {
			t.Errorf("etcd-backup label %s=%q, want %q", k, s.Labels[k], v)
		}
	}
	for k, v := range wiSecret.Annotations {
		if s.Annotations[k] != v {
			t.Errorf("etcd-backup annotation %s=%q, want %q", k, s.Annotations[k], v)
		}
	}

	// The token requestor writes the token and its renew timestamp.
	renew := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	base := s.DeepCopy()
	s.Data[entry.KeyToken] = []byte("token-from-the-requestor")
	metav1.SetMetaDataAnnotation(&s.ObjectMeta, securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp, renew)
	if err := f.Client.Patch(ctx, s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	withToken := s.ResourceVersion

	// A change of the entry makes housekeeper write etcd-backup again: the token stays.
	setRegion := func(region string) {
		t.Helper()
		live := &extensionsv1alpha1.BackupEntry{}
		if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
			t.Fatal(err)
		}
		base := live.DeepCopy()
		live.Spec.Region = region
		if err := f.Client.Patch(ctx, live, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	setRegion("eu-central-1")
	f.Eventually(30*time.Second, "etcd-backup rewritten with the new region", func() (bool, string) {
		s = read()
		return string(s.Data[s3.KeyRegion]) == "eu-central-1", fmt.Sprintf("region %q", s.Data[s3.KeyRegion])
	})
	if string(s.Data[entry.KeyToken]) != "token-from-the-requestor" || s.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp] != renew {
		t.Fatalf("after housekeeper's reconcile the token is %q and its renew timestamp %q: the requestor's write was lost",
			s.Data[entry.KeyToken], s.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp])
	}
	t.Logf("etcd-backup resourceVersion %s with the requestor's token, %s after housekeeper's reconcile: token kept", withToken, s.ResourceVersion)

	// Back to static credentials: the marks and the token go.
	live := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(wiSecret), live); err != nil {
		t.Fatal(err)
	}
	live.Labels, live.Annotations = nil, nil
	live.Data = map[string][]byte{s3.KeyAccessKeyID: []byte("AKIA-static"), s3.KeySecretAccessKey: []byte("static-secret")}
	if err := f.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	setRegion("eu-west-1")
	f.Eventually(30*time.Second, "etcd-backup rewritten with static credentials", func() (bool, string) {
		s = read()
		return string(s.Data[s3.KeyRegion]) == "eu-west-1", fmt.Sprintf("region %q", s.Data[s3.KeyRegion])
	})
	if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, []string{s3.KeyAccessKeyID, entry.DataKeyBucketName, s3.KeyRegion, s3.KeySecretAccessKey}) {
		t.Errorf("etcd-backup data keys after the switch %v: want the static keys only (no token, config, roleARN)", got)
	}
	for k := range s.Labels {
		if strings.Contains(k, "security.gardener.cloud") {
			t.Errorf("label %s kept after the switch to static credentials", k)
		}
	}
	for k := range s.Annotations {
		if strings.Contains(k, "security.gardener.cloud") {
			t.Errorf("annotation %s kept after the switch to static credentials", k)
		}
	}

	// Marked as a workload identity's without the WorkloadIdentity's name: a configuration problem.
	broken := wiSecret.DeepCopy()
	broken.ObjectMeta = metav1.ObjectMeta{Name: "entry-broken", Namespace: "garden", Labels: wiSecret.Labels,
		Annotations: map[string]string{securityv1alpha1constants.AnnotationWorkloadIdentityNamespace: "garden"}}
	f.create(broken)
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--broken"}})
	b := be.DeepCopy()
	b.ObjectMeta = metav1.ObjectMeta{Name: "shoot--dev--broken--1a2b"}
	b.Spec.SecretRef.Name = broken.Name
	f.create(b)
	f.Eventually(30*time.Second, "a configuration problem naming the missing annotation", func() (bool, string) {
		e := &extensionsv1alpha1.BackupEntry{}
		_, desc := f.describe(e, b.Name)
		le := e.Status.LastError
		return le != nil && strings.Contains(le.Description, securityv1alpha1constants.AnnotationWorkloadIdentityName) &&
			slices.Contains(le.Codes, gardencorev1beta1.ErrorConfigurationProblem), desc
	})
}
