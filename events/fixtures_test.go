package events

import (
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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

// testObject is an object as the bridge hands it over: how events name it and its trimmed JSON.
type testObject struct {
	Ref
	Data []byte
}

func testEntry() testObject {
	return testObject{
		Ref:  Ref{Kind: KindBackupEntry, Name: testEntryName, UID: testEntryUID, ResourceVersion: "48213", Generation: 3},
		Data: []byte(`{"kind":"BackupEntry","apiVersion":"extensions.gardener.cloud/v1alpha1","metadata":{"name":"shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c","uid":"5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c","resourceVersion":"48213","generation":3,"labels":{"name":"app"},"annotations":{"housekeeper.dev/retention":"168h","gardener.cloud/operation":"reconcile","shoot.gardener.cloud/purpose":"evaluation"},"finalizers":["extensions.gardener.cloud/backupentry"]},"spec":{"type":"azure","class":"seed","providerConfig":{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupConfig"},"region":"westeurope","bucketName":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","secretRef":{"name":"entry-shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c","namespace":"garden"}},"status":{"observedGeneration":3}}`),
	}
}

// testDeletingEntry is testEntry a minute after its deletion.
func testDeletingEntry() testObject {
	return testObject{
		Ref:  Ref{Kind: KindBackupEntry, Name: testEntryName, UID: testEntryUID, ResourceVersion: "48290", Generation: 3},
		Data: []byte(`{"kind":"BackupEntry","apiVersion":"extensions.gardener.cloud/v1alpha1","metadata":{"name":"shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c","uid":"5c0f8d4e-2b7a-4e31-9a3c-6d8e1f2a3b4c","resourceVersion":"48290","generation":3,"deletionTimestamp":"2025-03-14T09:25:53Z","labels":{"name":"app"},"annotations":{"housekeeper.dev/retention":"168h","gardener.cloud/operation":"reconcile","shoot.gardener.cloud/purpose":"evaluation"},"finalizers":["extensions.gardener.cloud/backupentry"]},"spec":{"type":"azure","class":"seed","providerConfig":{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupConfig"},"region":"westeurope","bucketName":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","secretRef":{"name":"entry-shoot--dev--app--0b6b7e6e-3f5a-4c8e-9d1a-2c4f5e6a7b8c","namespace":"garden"}},"status":{"observedGeneration":3}}`),
	}
}

func testBucketObj() testObject {
	return testObject{
		Ref:  Ref{Kind: KindBackupBucket, Name: testBucket, UID: testBucketUID, ResourceVersion: "1007", Generation: 1},
		Data: []byte(`{"kind":"BackupBucket","apiVersion":"extensions.gardener.cloud/v1alpha1","metadata":{"name":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","uid":"9e8d7c6b-5a49-4382-a716-2b3c4d5e6f70","resourceVersion":"1007","generation":1,"annotations":{"backupbucket.extensions.gardener.cloud/generated-secret-namespace":"garden"}},"spec":{"type":"azure","region":"westeurope","secretRef":{"name":"backupprovider","namespace":"garden"}},"status":{}}`),
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
	entry := testEntry()
	e, err := NewObjectEvent(testCluster, OpDeleting, entry.Ref, entry.Data, at(testNow))
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

func testEtcdBackupConfig() testObject {
	return testObject{
		Ref:  Ref{Kind: KindEtcdBackupConfig, Name: "team-a/etcd-main", UID: "0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10", ResourceVersion: "51877", Generation: 1},
		Data: []byte(`{"kind":"EtcdBackupConfig","apiVersion":"backup.housekeeper.dev/v1alpha1","metadata":{"name":"etcd-main","namespace":"team-a","uid":"0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10","resourceVersion":"51877","generation":1,"creationTimestamp":"2025-03-14T09:26:53Z"},"spec":{"etcd":{"endpoints":["https://etcd-main-client.team-a:2379"],"tlsSecretRef":{"name":"etcd-client-tls"}},"schedule":"0 */5 * * * *","keep":20,"destination":"s3-eu"},"status":{}}`),
	}
}

func testBackupCopyPolicy() testObject {
	return testObject{
		Ref:  Ref{Kind: KindBackupCopyPolicy, Name: "second-copy", UID: "3c9a1e7f-5b2d-4c6e-8f0a-1b2c3d4e5f60", ResourceVersion: "61502", Generation: 1},
		Data: []byte(`{"kind":"BackupCopyPolicy","apiVersion":"backup.housekeeper.dev/v1alpha1","metadata":{"name":"second-copy","uid":"3c9a1e7f-5b2d-4c6e-8f0a-1b2c3d4e5f60","resourceVersion":"61502","generation":1,"creationTimestamp":"2025-03-14T09:26:53Z"},"spec":{"buckets":{"types":["azure"]},"destination":"s3-eu","lagObjective":"24h","schedule":"0 0 * * * *","concurrency":2},"status":{}}`),
	}
}

func testRestoreDrill() testObject {
	return testObject{
		Ref:  Ref{Kind: KindRestoreDrill, Name: "weekly-eval", UID: "7d3e2c1b-0a9f-4e8d-8c7b-6a5f4e3d2c1b", ResourceVersion: "60214", Generation: 1},
		Data: []byte(`{"kind":"RestoreDrill","apiVersion":"backup.housekeeper.dev/v1alpha1","metadata":{"name":"weekly-eval","uid":"7d3e2c1b-0a9f-4e8d-8c7b-6a5f4e3d2c1b","resourceVersion":"60214","generation":1,"creationTimestamp":"2025-03-14T09:26:53Z"},"spec":{"purposes":["evaluation"],"schedule":"0 0 3 * * *","timeZone":"Europe/Berlin","concurrency":1,"memoryBudget":"512Mi","maxRestorableAge":"24h","timeout":"30m"},"status":{}}`),
	}
}
