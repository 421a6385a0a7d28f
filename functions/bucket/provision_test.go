package bucket_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/azurecloud"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// startInCloud runs the bucket function with a fake Azure management plane whose accounts for
// buckets Azurite serves.
func startInCloud(t *testing.T, buckets ...string) (*fixture, *azurecloud.Cloud) {
	cloud := azurecloud.New(buckets...)
	p := pipeline.Start(t, testenv.WithAzuriteAccounts(cloud.AzuriteAccounts()...))
	providers := objectstore.NewRegistry(azure.New(azure.WithManagementTransport(cloud.Transport()),
		azure.WithServiceURL(p.Env.Azurite.ServiceURL), azure.WithPollFrequency(10*time.Millisecond)))
	p.RunFunction(bucket.Definition, providers)
	f := &fixture{Pipeline: p}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	return f, cloud
}

// A bucket whose secret is Gardener's service principal: the function provisions the group and
// account through ARM, creates the container in Azurite with the key it lists, publishes that
// key, rotates it when the annotation asks, and on deletion removes container, group and
// generated secret.
func TestServicePrincipalBucket(t *testing.T) {
	const name = "sp-seed"
	f, cloud := startInCloud(t, name)
	cloud.AddServicePrincipal("client-1", "client-secret-1")
	ctx := context.Background()
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "seed-backup", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyTenantID: []byte("tenant-1"), azure.KeyClientID: []byte("client-1"),
		azure.KeyClientSecret: []byte("client-secret-1"), azure.KeySubscriptionID: []byte("subscription-1"),
	}})
	b := newBucket(name, "azure", "seed-backup")
	b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","rotationConfig":{"rotationPeriodDays":7,"expirationPeriodDays":14}}`)}
	f.create(b)
	f.waitSucceeded(name)

	generated := f.secret("garden", "generated-bucket-"+name)
	if got := string(generated.Data[azure.KeyStorageAccount]); got != azure.AccountName(name) {
		t.Fatalf("generated storageAccount %q, want %q", got, azure.AccountName(name))
	}
	if loc, ok := cloud.Group(name); !ok || loc != "westeurope" {
		t.Fatalf("resource group %s: exists %v in %q", name, ok, loc)
	}
	opened := func(data map[string][]byte) objectstore.Store {
		t.Helper()
		s, err := azure.New().Open(name, data)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := objectstore.PutBytes(ctx, opened(generated.Data), "shoot--a/etcd-main/v2/Full-1", []byte("snapshot")); err != nil {
		t.Fatalf("writing into the container with the generated secret: %v", err)
	}

	// Rotation by annotation: a new key is published, the annotation removed, and the old
	// snapshot stays readable with the new key.
	live := &extensionsv1alpha1.BackupBucket{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	patch(t, f.Client, live, func() { metav1.SetMetaDataAnnotation(&live.ObjectMeta, azure.AnnotationRotate, "true") })
	f.Eventually(30*time.Second, "the rotated key published and the annotation removed", func() (bool, string) {
		cur, s := f.state(name)
		if cur == nil {
			return false, s
		}
		_, asked := cur.Annotations[azure.AnnotationRotate]
		rotated := string(f.secret("garden", "generated-bucket-"+name).Data[azure.KeyStorageKey]) != string(generated.Data[azure.KeyStorageKey])
		return rotated && !asked, s
	})
	rotated := f.secret("garden", "generated-bucket-"+name)
	if _, err := opened(rotated.Data).Stat(ctx, "shoot--a/etcd-main/v2/Full-1"); err != nil {
		t.Fatalf("the snapshot written before the rotation, read with the new key: %v", err)
	}

	// Deletion: container, group and generated secret go.
	if err := f.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	f.Eventually(30*time.Second, "bucket gone", func() (bool, string) {
		cur, s := f.state(name)
		return cur == nil && strings.Contains(s, "not found"), s
	})
	if _, ok := cloud.Group(name); ok {
		t.Error("the resource group is still there")
	}
	err := opened(rotated.Data).List(ctx, "", func([]string) error { return nil })
	if !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("listing the container after deletion: %v, want ErrBucketNotFound", err)
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "generated-bucket-" + name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("generated secret: %v, want not found", err)
	}
}

// A bucket whose secret is a workload identity gardenlet has not issued a token for yet waits
// with a lastError that says so, and reconciles once the token is written.
func TestWorkloadIdentityBucket(t *testing.T) {
	const name = "wi-seed"
	f, cloud := startInCloud(t, name)
	cloud.AddWorkloadIdentity("wi-client", "issued-token")
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + name, Namespace: "garden",
			Labels: map[string]string{"security.gardener.cloud/purpose": "workload-identity-token-requestor"}},
		Data: map[string][]byte{azure.KeyConfig: []byte("apiVersion: azure.provider.extensions.gardener.cloud/v1alpha1\nkind: WorkloadIdentityConfig\nclientID: wi-client\ntenantID: tenant-1\nsubscriptionID: subscription-1\n")},
	}
	f.create(secret)
	f.create(newBucket(name, "azure", secret.Name))
	f.Eventually(30*time.Second, name+" waiting for its token", func() (bool, string) {
		b, s := f.state(name)
		return b != nil && b.Status.LastError != nil && strings.Contains(b.Status.LastError.Description, `no "token" yet`), s
	})
	patch(t, f.Client, secret, func() { secret.Data[azure.KeyToken] = []byte("issued-token") })
	f.waitSucceeded(name)
	generated := f.secret("garden", "generated-bucket-"+name)
	store, err := azure.New().Open(name, generated.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := objectstore.PutBytes(ctx, store, "shoot--w/etcd-main/v2/Full-1", []byte("snapshot")); err != nil {
		t.Fatalf("writing into the container with the generated secret: %v", err)
	}
	if dls := f.DeadLetters(bucket.Definition.Name); len(dls) != 0 {
		t.Errorf("dead letters while waiting for the token: %+v", dls)
	}
}

// An Azure bucket whose providerConfig asks for immutability: with a service principal the
// container gets a locked policy of the period asked (through ARM) and the account the rule
// for marked blobs; with a storage account key, which cannot reach ARM, it is a configuration
// problem naming the credentials needed.
func TestImmutableAzureBucket(t *testing.T) {
	const name = "immutable-seed"
	f, cloud := startInCloud(t, name)
	cloud.AddServicePrincipal("client-1", "client-secret-1")
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "seed-backup", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyTenantID: []byte("tenant-1"), azure.KeyClientID: []byte("client-1"),
		azure.KeyClientSecret: []byte("client-secret-1"), azure.KeySubscriptionID: []byte("subscription-1"),
	}})
	immutable := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","immutability":{"locked":true,"retentionPeriod":"48h","retentionType":"bucket"}}`)}
	b := newBucket(name, "azure", "seed-backup")
	b.Spec.ProviderConfig = immutable
	f.create(b)
	b = f.waitSucceeded(name)
	if d := b.Status.LastOperation.Description; !strings.Contains(d, "immutability policy set: 2 days, locked") {
		t.Errorf("description %q, want the policy named", d)
	}
	if days, locked, ok := cloud.ImmutabilityPolicy(name, azure.AccountName(name), name); !ok || days != 2 || !locked {
		t.Errorf("container policy: exists %v, %d days, locked %v; want 2 days, locked", ok, days, locked)
	}
	rules := cloud.ManagementRules(name, azure.AccountName(name))
	if len(rules) != 1 || *rules[0].Name != azure.LifecycleRule {
		t.Errorf("management policy rules %v, want %s", rules, azure.LifecycleRule)
	}

	f.create(f.azureSecret("account-key", stack.AzuriteKey))
	k := newBucket("immutable-by-key", "azure", "account-key")
	k.Spec.ProviderConfig = immutable
	f.create(k)
	f.waitError("immutable-by-key", "service-principal or workload-identity credentials", gardencorev1beta1.ErrorConfigurationProblem)
}
