package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/azurecloud"
)

// azureBucket is the bucket of the Azure scenario; Azurite serves its account.
const azureBucket = "hk-azure-sp"

// azureSide is Azure for housekeeper's processes: the management plane served over HTTPS by
// the fake cloud, the data plane a real Azurite with the scenario's account. Started once, on
// the first seed that needs it.
type azureSide struct {
	once    sync.Once
	err     error
	cloud   *azurecloud.Cloud
	server  *azurecloud.Server
	azurite *stack.Azurite
}

func (a *azureSide) start(t *testing.T, l *logs) error {
	a.once.Do(func() {
		a.cloud = azurecloud.New(azureBucket)
		a.cloud.AddServicePrincipal("conformance-client", "conformance-client-secret")
		if a.server, a.err = a.cloud.Serve(l.dir); a.err != nil {
			return
		}
		t.Cleanup(a.server.Close)
		if a.azurite, a.err = stack.StartAzurite(l.file(t, "azurite.log"), a.cloud.AzuriteAccounts()...); a.err != nil {
			return
		}
		t.Cleanup(a.azurite.Stop)
	})
	return a.err
}

// env is what housekeeper's processes need to reach it.
func (a *azureSide) env() []string {
	return []string{
		"HOUSEKEEPER_AZURE_AUTHORITY_HOST=" + a.server.URL,
		"HOUSEKEEPER_AZURE_RESOURCE_MANAGER=" + a.server.URL,
		"HOUSEKEEPER_AZURE_BLOB_SERVICE_URL=" + a.azurite.ServiceURL,
		"SSL_CERT_FILE=" + a.server.CAFile,
	}
}

// 8-azure-service-principal: a BackupBucket whose seed secret is Gardener's Azure service
// principal, under gardenlet: provisioned through ARM, an entry's etcd-backup with the listed
// key, the key rotated by annotation and followed by the entry, then entry and bucket deleted
// with the container, the resource group and the generated secret.
func (r *run) azureServicePrincipal(t *testing.T) {
	hk, ok := r.ext.(housekeeper)
	if !ok {
		t.Skipf("%s serves type local only; the control for this path is provider-azure, which needs a real Azure", r.ext.name())
	}
	ctx := context.Background()
	a := hk.azure
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "azure-service-principal", Namespace: r.ns},
		Data: map[string][]byte{
			azure.KeyTenantID: []byte("conformance-tenant"), azure.KeyClientID: []byte("conformance-client"),
			azure.KeyClientSecret: []byte("conformance-client-secret"), azure.KeySubscriptionID: []byte("conformance-subscription"),
		},
	}
	if err := r.g.client.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	d := r.deployProviderBucket(t, azureBucket, azure.Type, "westeurope", creds,
		`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","rotationConfig":{"expirationPeriodDays":14,"rotationPeriodDays":7}}`)
	if _, ok := a.cloud.Group(azureBucket); !ok {
		t.Fatalf("no resource group %s in the cloud", azureBucket)
	}
	generated := func() map[string][]byte {
		s := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "generated-bucket-" + azureBucket}, s); err != nil {
			t.Fatalf("generated secret: %v", err)
		}
		return s.Data
	}
	first := generated()
	if got := string(first[azure.KeyStorageAccount]); got != azure.AccountName(azureBucket) {
		t.Fatalf("generated storageAccount %q, want %q", got, azure.AccountName(azureBucket))
	}

	shoot := r.shoot(t, "azure", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	e := &entryRef{name: technicalID(shoot) + "--" + string(shoot.UID), shoot: shoot, seed: r.src}
	e.deployer = r.entryDeployer(shoot, e.name, r.src.name, azureBucket)
	if err := e.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.expectEntrySucceeded(t, e)
	etcdBackupKey := func() string {
		s := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Namespace: technicalID(shoot), Name: "etcd-backup"}, s); err != nil {
			return ""
		}
		return string(s.Data[azure.KeyStorageKey])
	}
	r.eventually(t, "etcd-backup holds the generated key", func() error {
		if etcdBackupKey() != string(first[azure.KeyStorageKey]) {
			return errors.New("not the generated key")
		}
		return nil
	})
	store, err := azure.New().Open(azureBucket, first)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := e.name + "/etcd-main/v2/Full-00000000-00000001-1"
	if err := objectstore.PutBytes(ctx, store, snapshot, []byte("snapshot")); err != nil {
		t.Fatalf("writing a snapshot with the generated key: %v", err)
	}

	// Rotation by annotation on the seed's BackupBucket; gardenlet's next reconcile of the
	// entry (deployed again here, as its periodic reconcile would) copies the new key.
	bb := &extensionsv1alpha1.BackupBucket{}
	if err := r.src.client.Get(ctx, client.ObjectKey{Name: azureBucket}, bb); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(bb.DeepCopy())
	metav1.SetMetaDataAnnotation(&bb.ObjectMeta, azure.AnnotationRotate, "true")
	if err := r.src.client.Patch(ctx, bb, patch); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "the rotated key published", func() error {
		if string(generated()[azure.KeyStorageKey]) == string(first[azure.KeyStorageKey]) {
			return errors.New("still the first key")
		}
		if err := r.src.client.Get(ctx, client.ObjectKey{Name: azureBucket}, bb); err != nil {
			return err
		}
		if _, asked := bb.Annotations[azure.AnnotationRotate]; asked {
			return errors.New("the rotate annotation is still there")
		}
		return nil
	})
	rotated := generated()
	if err := e.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "etcd-backup follows the rotated key", func() error {
		if etcdBackupKey() != string(rotated[azure.KeyStorageKey]) {
			return errors.New("not the rotated key yet")
		}
		return nil
	})
	store, err = azure.New().Open(azureBucket, rotated)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Stat(ctx, snapshot); err != nil {
		t.Fatalf("the snapshot written before the rotation, read with the rotated key: %v", err)
	}

	// Deletion: the entry's purge, then the bucket with its container, group and secret.
	if err := e.deployer.SetForceDeletionAnnotation(ctx); err != nil {
		t.Fatal(err)
	}
	r.destroyEntry(t, e)
	r.destroyProviderBucket(t, d, azureBucket)
	if _, ok := a.cloud.Group(azureBucket); ok {
		t.Error("the resource group is still there")
	}
	if err := store.List(ctx, "", func([]string) error { return nil }); !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Errorf("listing the container after deletion: %v, want ErrBucketNotFound", err)
	}
	r.expectNoSecret(t, r.src, "garden", "generated-bucket-"+azureBucket)
	if err := r.src.client.Get(ctx, client.ObjectKey{Name: azureBucket}, &extensionsv1alpha1.BackupBucket{}); !apierrors.IsNotFound(err) {
		t.Errorf("extension BackupBucket: %v, want NotFound", err)
	}
	t.Logf("azure: bucket provisioned through ARM (%d calls), key rotated and followed by etcd-backup, all deleted", len(a.cloud.Calls()))
}
