package etcdbackup_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// testDestination is a BackupDestination of one provider with its store, created in the API.
type testDestination struct {
	obj   *backupv1alpha1.BackupDestination
	store objectstore.Store
}

// providers returns a registry of all three providers, local rooted in a temporary directory.
func providers(t testing.TB) (objectstore.Registry, string) {
	root := t.TempDir()
	return objectstore.NewRegistry(azure.New(), s3.New(), local.New(root)), root
}

// newDestination creates bucket on the provider typ of env and a BackupDestination for it.
func newDestination(t testing.TB, env *testenv.Env, c client.Client, reg objectstore.Registry, typ, bucket string) testDestination {
	t.Helper()
	ctx := context.Background()
	spec := backupv1alpha1.BackupDestinationSpec{Type: typ, Bucket: bucket}
	var creds map[string][]byte
	switch typ {
	case azure.Type:
		creds = map[string][]byte{azure.KeyStorageAccount: []byte(stack.AzuriteAccount), azure.KeyStorageKey: []byte(stack.AzuriteKey)}
		spec.Endpoint = env.Azurite.Endpoint
	case s3.Type:
		creds = map[string][]byte{s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
			s3.KeyS3ForcePathStyle: []byte("true")}
		spec.Endpoint, spec.Region = env.S3.Endpoint, stack.S3Region
	}
	if creds != nil {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "dest-" + bucket}, Data: creds}
		if err := c.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		spec.CredentialsSecretRef = &backupv1alpha1.SecretReference{Namespace: "garden", Name: secret.Name}
	}
	d := &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: bucket}, Spec: spec}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	withEndpoint := map[string][]byte{}
	for k, v := range creds {
		withEndpoint[k] = v
	}
	if spec.Endpoint != "" {
		withEndpoint["endpoint"] = []byte(spec.Endpoint)
	}
	p, err := reg.Get(typ)
	if err != nil {
		t.Fatal(err)
	}
	store, err := objectstore.InRegion(p, spec.Region).Open(bucket, withEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx); err != nil {
		t.Fatal(err)
	}
	return testDestination{obj: d, store: store}
}

func createNamespaces(t testing.TB, c client.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
}

func listAll(t testing.TB, s objectstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.List(context.Background(), prefix, func(page []string) error { keys = append(keys, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func createSecret(t testing.TB, c client.Client, namespace, name string, data map[string][]byte) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}); err != nil {
		t.Fatal(err)
	}
}
