package destination_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

// A gcp or openstack destination whose credentials secret is missing, or holds none of the
// provider's keys, is a Problem of reason MissingCredentials; one whose endpoint the provider
// cannot take is InvalidDestination. Nothing is sent to a store.
func TestOpenGCPAndOpenStack(t *testing.T) {
	dest := func(name, typ, secret, endpoint string) *backupv1alpha1.BackupDestination {
		return &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: typ, Bucket: "etcd-copies", Endpoint: endpoint,
				CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: secret}}}
	}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "empty"}},
		dest("gcp-no-secret", backupv1alpha1.DestinationGCP, "missing", ""),
		dest("openstack-no-secret", backupv1alpha1.DestinationOpenStack, "missing", ""),
		dest("gcp-no-keys", backupv1alpha1.DestinationGCP, "empty", ""),
		dest("openstack-no-keys", backupv1alpha1.DestinationOpenStack, "empty", ""),
		dest("gcp-bad-endpoint", backupv1alpha1.DestinationGCP, "empty", "https://gcs.example.com/?a=b"),
	).Build()
	providers := objectstore.NewRegistry(gcs.New(), swift.New())
	for name, want := range map[string]string{
		"gcp-no-secret":       backupv1alpha1.ReasonMissingCredentials,
		"openstack-no-secret": backupv1alpha1.ReasonMissingCredentials,
		"gcp-no-keys":         backupv1alpha1.ReasonMissingCredentials,
		"openstack-no-keys":   backupv1alpha1.ReasonMissingCredentials,
		"gcp-bad-endpoint":    backupv1alpha1.ReasonInvalidDestination,
	} {
		store, d, err := destination.Open(t.Context(), c, providers, name)
		var p *destination.Problem
		if store != nil || !errors.As(err, &p) || p.Reason != want {
			t.Errorf("%s: store %v, error %v; want a Problem of reason %s", name, store, err, want)
			continue
		}
		if d == nil || d.Name != name {
			t.Errorf("%s: the destination read is %v", name, d)
		}
	}
}

// A gcp destination's endpoint reaches the gcs provider and etcd-backup-restore as a gcp
// BackupBucket's store.endpointOverride does (Where.Config), not as a credential; an openstack
// destination's region is Where.Region and the credentials' region, as in an entry's
// etcd-backup.
func TestReadGCPAndOpenStack(t *testing.T) {
	const endpoint = "http://127.0.0.1:4443/storage/v1/"
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "gcp"}, Data: map[string][]byte{gcs.KeyServiceAccountJSON: []byte("{}")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "openstack"}, Data: map[string][]byte{swift.KeyAuthURL: []byte("https://keystone.example.com/v3")}},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "gcs"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: backupv1alpha1.DestinationGCP, Bucket: "etcd-copies", Endpoint: endpoint,
				CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "gcp"}}},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "swift"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: backupv1alpha1.DestinationOpenStack, Bucket: "etcd-copies", Region: "RegionTwo",
				CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "openstack"}}},
	).Build()

	_, w, creds, err := destination.Read(t.Context(), c, "gcs")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := creds["endpoint"]; ok || len(creds) != 1 {
		t.Errorf("gcp credentials %v: want the secret's keys only", keysOf(creds))
	}
	if _, err := gcs.New().Configure(w.Config); err != nil {
		t.Errorf("the gcs provider refuses the config %s: %v", w.Config, err)
	}
	s, err := gcs.New().EtcdbrStore(w, creds)
	if err != nil || s.EndpointOverride != endpoint {
		t.Errorf("etcd-backup-restore's endpoint override %q (%v), want %q", s.EndpointOverride, err, endpoint)
	}

	_, w, creds, err = destination.Read(t.Context(), c, "swift")
	if err != nil {
		t.Fatal(err)
	}
	if w.Region != "RegionTwo" || string(creds[swift.KeyRegion]) != "RegionTwo" || w.Config != nil {
		t.Errorf("openstack: where %+v, credentials %v", w, keysOf(creds))
	}
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// An object's spec that cannot run is a Problem of its reason, whatever the error: the
// condition takes its reason and message, and errors.Is still finds the cause.
func TestInvalidIsAProblemWrappingItsCause(t *testing.T) {
	cause := errors.New("spec.buckets selects nothing")
	err := fmt.Errorf("planning: %w", destination.Invalid(backupv1alpha1.ReasonInvalidPolicy, cause))
	var p *destination.Problem
	if !errors.As(err, &p) || p.Reason != backupv1alpha1.ReasonInvalidPolicy || p.Message != cause.Error() {
		t.Fatalf("%v: want a Problem %s: %s", err, backupv1alpha1.ReasonInvalidPolicy, cause)
	}
	if !errors.Is(err, cause) {
		t.Errorf("%v does not wrap its cause", err)
	}
	if _, ok := destination.ProblemReason(err); !ok {
		t.Errorf("ProblemReason(%v) is not ok", err)
	}
}
