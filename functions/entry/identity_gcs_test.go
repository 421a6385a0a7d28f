package entry_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	securityv1alpha1constants "github.com/gardener/gardener/pkg/apis/security/v1alpha1/constants"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// A gcp entry whose secret is a workload identity's: etcd-backup carries what provider-gcp
// writes — config, projectID, and the external_account configuration as credentialsConfig and
// as serviceaccount.json (the file etcd-druid points GOOGLE_APPLICATION_CREDENTIALS at), reading
// the token etcd-druid mounts at /var/.gcp/token, or /var/.source-gcp/token for a migration's
// source- entry (provider-gcp#1209).
func TestGCPWorkloadIdentityEntrySecret(t *testing.T) {
	p := pipeline.Start(t)
	p.RunFunction(entry.Definition, objectstore.NewRegistry(gcs.New()))
	f := &fixture{Pipeline: p}
	ctx := context.Background()
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	const shoot, namespace = "shoot--dev--gwi--5a1b", "shoot--dev--gwi"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	config := `apiVersion: gcp.provider.extensions.gardener.cloud/v1alpha1
kind: WorkloadIdentityConfig
projectID: my-project-1
credentialsConfig:
  type: external_account
  audience: //iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/gardener
  subject_token_type: urn:ietf:params:oauth:token-type:jwt
  token_url: https://sts.googleapis.com/v1/token
  credential_source:
    file: /where/gardenlet/had/it
`
	for _, tc := range []struct{ entry, secret, tokenFile string }{
		{shoot, entry.SecretName, "/var/.gcp/token"},
		{"source-" + shoot, entry.SourceSecretName, "/var/.source-gcp/token"},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			wi := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "entry-" + tc.entry, Namespace: "garden",
					Labels: map[string]string{
						securityv1alpha1constants.LabelPurpose:                  securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor,
						securityv1alpha1constants.LabelWorkloadIdentityProvider: "gcp",
					},
					Annotations: map[string]string{
						securityv1alpha1constants.AnnotationWorkloadIdentityName:      "seed-backup",
						securityv1alpha1constants.AnnotationWorkloadIdentityNamespace: "garden",
					},
				},
				Data: map[string][]byte{entry.KeyConfig: []byte(config)},
			}
			f.create(wi)
			f.create(&extensionsv1alpha1.BackupEntry{
				ObjectMeta: metav1.ObjectMeta{Name: tc.entry},
				Spec: extensionsv1alpha1.BackupEntrySpec{
					DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: gcs.Type}, BucketName: bucketName, Region: "europe-west1",
					SecretRef: corev1.SecretReference{Name: wi.Name, Namespace: "garden"},
				},
			})
			f.waitState(&extensionsv1alpha1.BackupEntry{}, tc.entry, gardencorev1beta1.LastOperationStateSucceeded)
			s := &corev1.Secret{}
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tc.secret}, s); err != nil {
				t.Fatal(err)
			}
			want := []string{entry.DataKeyBucketName, entry.KeyConfig, gcs.KeyCredentialsConfig, gcs.KeyProjectID, gcs.KeyServiceAccountJSON}
			if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, want) {
				t.Fatalf("%s data keys %v, want %v", tc.secret, got, want)
			}
			if string(s.Data[gcs.KeyProjectID]) != "my-project-1" || string(s.Data[gcs.KeyServiceAccountJSON]) != string(s.Data[gcs.KeyCredentialsConfig]) {
				t.Errorf("projectID %q; serviceaccount.json and credentialsConfig differ", s.Data[gcs.KeyProjectID])
			}
			var file struct {
				Type             string `json:"type"`
				CredentialSource struct {
					File string `json:"file"`
				} `json:"credential_source"`
			}
			if err := json.Unmarshal(s.Data[gcs.KeyServiceAccountJSON], &file); err != nil {
				t.Fatal(err)
			}
			if file.Type != "external_account" || file.CredentialSource.File != tc.tokenFile {
				t.Errorf("serviceaccount.json %s: want an external_account reading %s", s.Data[gcs.KeyServiceAccountJSON], tc.tokenFile)
			}
			if s.Labels[securityv1alpha1constants.LabelPurpose] != securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor {
				t.Errorf("%s lacks the token requestor's purpose label: %v", tc.secret, s.Labels)
			}
		})
	}
}
