package events

import (
	"maps"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Fixtures shared by the tests of this package.

const (
	testCluster   = "garden-eu1"
	testEntryName = "shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c"
	testEntryUID  = "5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c"
	testBucket    = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
	testBucketUID = "9e8d7c6b-5a49-4382-a716-2b3c4d5e6f70"
)

// testNow is the clock of every event built in tests.
var testNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// at fixes an object event's time (the exported API always uses the wall clock).
func at(t time.Time) ObjectEventOption {
	return func(o *objectEventOptions) { o.now = func() time.Time { return t } }
}

var testManagedFields = []metav1.ManagedFieldsEntry{{
	Manager:    "gardenlet",
	Operation:  metav1.ManagedFieldsOperationUpdate,
	APIVersion: "extensions.gardener.cloud/v1alpha1",
	FieldsType: "FieldsV1",
	FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:bucketName":{},"f:region":{}}}`)},
}}

func testEntry() *extensionsv1alpha1.BackupEntry {
	class := extensionsv1alpha1.ExtensionClassSeed
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testEntryName,
			UID:             testEntryUID,
			ResourceVersion: "48213",
			Generation:      3,
			Annotations: map[string]string{
				lastAppliedAnnotation:                   `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"BackupEntry"}`,
				"gardener.cloud/operation":              "reconcile",
				"shoot.gardener.cloud/purpose":          "evaluation",
				"backup.housekeeper.dev/retention-days": "7",
			},
			Labels:        map[string]string{"name": "app"},
			Finalizers:    []string{"extensions.gardener.cloud/housekeeper"},
			ManagedFields: testManagedFields,
		},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{
				Type:           "azure",
				Class:          &class,
				ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupConfig"}`)},
			},
			Region:     "westeurope",
			BucketName: testBucket,
			SecretRef:  corev1.SecretReference{Name: "entry-" + testEntryName, Namespace: "garden"},
		},
		Status: extensionsv1alpha1.BackupEntryStatus{
			DefaultStatus: extensionsv1alpha1.DefaultStatus{ObservedGeneration: 3},
		},
	}
}

func testBucketObj() *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{
			Name:            testBucket,
			UID:             testBucketUID,
			ResourceVersion: "1007",
			Generation:      1,
			Annotations: map[string]string{
				lastAppliedAnnotation: `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"BackupBucket"}`,
				"backupbucket.extensions.gardener.cloud/generated-secret-namespace": "garden",
			},
			ManagedFields: testManagedFields,
		},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"},
			Region:      "westeurope",
			SecretRef:   corev1.SecretReference{Name: "backupprovider", Namespace: "garden"},
		},
	}
}

func testPurgeData() PurgeData {
	return PurgeData{
		Entry:      testEntryName,
		UID:        testEntryUID,
		BucketName: testBucket,
		Prefix:     testEntryName + "/",
		DueAt:      time.Date(2025, 3, 21, 9, 26, 53, 0, time.UTC),
	}
}

// encoded builds and encodes a valid event, failing the test on any error.
func encoded(t testing.TB) *nats.Msg {
	t.Helper()
	e, err := NewObjectEvent(testCluster, KindBackupEntry, OpDeleting, testEntry(), at(testNow))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func cloneHeader(h nats.Header) nats.Header {
	c := make(nats.Header, len(h))
	for k, v := range maps.All(h) {
		c[k] = append([]string(nil), v...)
	}
	return c
}

func testEtcdBackupConfig() *backupv1alpha1.EtcdBackupConfig {
	return &backupv1alpha1.EtcdBackupConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "etcd-main", UID: "0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10",
			ResourceVersion: "51877", Generation: 1, CreationTimestamp: metav1.NewTime(testNow)},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{
			Etcd:     backupv1alpha1.EtcdReference{Endpoints: []string{"https://etcd-main-client.team-a:2379"}, TLSSecretRef: &backupv1alpha1.LocalObjectReference{Name: "etcd-client-tls"}},
			Schedule: "0 */5 * * * *", Keep: 20, Destination: "s3-eu",
		},
	}
}
