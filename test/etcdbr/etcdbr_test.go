// Package etcdbr_test runs etcd-backup-restore (etcdbrctl v0.44.1) against the secrets
// housekeeper writes: for each provider (azure on Azurite, local) the real pipeline — bridge,
// bucket and entry functions, and the purge as a process of its own — creates a bucket and
// two BackupEntries; a real etcd is backed up through one entry's etcd-backup secret, restored
// into a fresh data directory and read back; then the entry is deleted, and exactly its
// snapshots are purged while the neighbour entry's stay.
//
// etcd and etcdbrctl run as uid 65532 with umask 0077 and the purge runs as uid 65532, as
// etcd-druid and infra/ deploy them; switching users needs root, so the test fails without it.
//
// TestDrillRealRestore* drill a backup the pinned etcdbrctl wrote with that etcdbrctl
// configured: its restore and the drill's replay agree; where its embedded etcd revokes a lease
// mid-restore, the drill names the keys it lost (etcd-backup-restore#1045) or reports its
// failure (#1046). TestDrillAgainstTheLiveEtcd* drill such a backup against its etcd, which keeps
// running: Exact where the restored store is what it holds at the restored revision and
// etcdbrctl's restore agrees, NotRestorable where a delta's value was changed, Unverified once it
// compacted past the revision. TestDrillTheCopy drills such a backup's copy on an S3 server
// beside the first store. TestDrillKeepsASetGardenadmRestores keeps the set a drill proved
// (`housekeeper drill --keep`) and restores it with `etcdbrctl initialize` as gardenadm restore
// does. They run as this process's user. TestFailOverToTheCopy fails a running
// etcd's backups over to their copy and back, etcd-backup-restore following the secret.
//
// BenchmarkDrillRestore (make bench only) restores one large backup with `etcdbrctl restore` and
// with housekeeper's drill, each as its own process, and prints their time and memory side by
// side; it runs both as this process's user. BenchmarkCopy (make bench only) copies such a backup
// from its local store to an S3 server with `etcdbrctl copy` and with housekeeper's copier
// (replica.Copy), each as its own process, and prints their time, memory and requests side by
// side, every copied object checked at both ends, and the copy lag at rest of one new delta.
package etcdbr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/azurecloud"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// etcdDruidUser is the uid and gid etcd-druid runs etcd and etcd-backup-restore as, and the
// purge's runAsUser/runAsGroup in infra/keda/purge.yaml and infra/knative/purge.yaml.
const etcdDruidUser = 65532

var etcdDruidCredential = &syscall.Credential{Uid: etcdDruidUser, Gid: etcdDruidUser}

// A short delta period and a handful of keys: every snapshot kind within seconds.
var snapshotOptions = stack.SnapshotOptions{
	FullSnapshotSchedule: "0 0 * * *", // the full snapshot is the one taken at start
	DeltaSnapshotPeriod:  time.Second,
	MaxBackups:           7,
}

func TestEtcdBackupRestoreWithHousekeepersSecrets(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("this test runs etcd-backup-restore and the purge as uid %d, as deployed, which needs root; it runs as uid %d", etcdDruidUser, uid)
	}
	f := start(t)
	for _, provider := range []string{azure.Type, gcs.Type, swift.Type, local.Type} {
		t.Run(provider, func(t *testing.T) {
			f.in(t).backupRestorePurge(t, provider, "etcdbr-"+provider, provider+"-credentials", nil)
		})
	}
	// Gardener's Azure seed secret: the bucket is provisioned through ARM, and its key is
	// rotated between the target's backup and the neighbour's: the target is restored from
	// snapshots written with the old key, through a secret holding the new one.
	t.Run("azure-service-principal", func(t *testing.T) {
		f := f.in(t)
		f.backupRestorePurge(t, azure.Type, spBucket, "azure-service-principal", func(t *testing.T, shoots ...shoot) {
			f.rotate(t, spBucket, shoots)
		})
	})
}

// An immutable S3 bucket (providerConfig.immutability, a day of governance retention):
// etcd-backup-restore backs up into it and restores from it as from any other; deleting the
// entry is not held by the lock: the entry is released, its snapshots stay, marked for
// deletion, and a neighbour's stay unmarked.
func TestEtcdBackupRestoreWithAnImmutableBucket(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("this test runs etcd-backup-restore and the purge as uid %d, as deployed, which needs root; it runs as uid %d", etcdDruidUser, uid)
	}
	f := start(t)
	ctx := context.Background()
	const bucketName = "etcdbr-immutable"
	f.create(t, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type, ProviderConfig: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","immutability":{"retentionType":"bucket","retentionPeriod":"24h","mode":"governance"}}`)}},
			Region:    stack.S3Region,
			SecretRef: corev1.SecretReference{Name: "s3-credentials", Namespace: "garden"},
		},
	})
	f.waitSucceeded(t, &extensionsv1alpha1.BackupBucket{}, bucketName)
	target := shoot{entry: "shoot--immutable--one--0a1b2c3d", namespace: "shoot--immutable--one"}
	neighbour := shoot{entry: "shoot--immutable--two--4e5f6a7b", namespace: "shoot--immutable--two"}
	for _, s := range []shoot{target, neighbour} {
		f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}})
		f.create(t, &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: s.entry, Annotations: map[string]string{entry.AnnotationRetention: "0s"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type}, BucketName: bucketName, Region: stack.S3Region,
				SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
			},
		})
		f.waitSucceeded(t, &extensionsv1alpha1.BackupEntry{}, s.entry)
	}
	written, targetPrefix := f.backUp(t, s3.Type, target, 3, 3)
	_, neighbourPrefix := f.backUp(t, s3.Type, neighbour, 2, 0)
	bucketStore := f.bucket(t, s3.Type, target)
	targetObjects := keysUnder(t, bucketStore, targetPrefix)
	neighbourObjects := keysUnder(t, bucketStore, neighbourPrefix)

	got := f.restore(t, s3.Type, target)
	for k, v := range written {
		if got[k] != v {
			t.Errorf("restored %s = %q, wrote %q", k, got[k], v)
		}
	}
	f.drill(t, target, written, targetObjects)

	e := &extensionsv1alpha1.BackupEntry{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: target.entry}, e); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	f.Eventually(60*time.Second, target.entry+" released", func() (bool, string) {
		if why := f.purgeExited(); why != "" {
			t.Fatal(why)
		}
		err := f.Client.Get(ctx, client.ObjectKey{Name: target.entry}, &extensionsv1alpha1.BackupEntry{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
	locking := bucketStore.(objectstore.Locking)
	if left := keysUnder(t, bucketStore, targetPrefix); !slices.Equal(left, targetObjects) {
		t.Errorf("after the release the prefix holds %v, want the locked snapshots %v", left, targetObjects)
	}
	for _, k := range targetObjects {
		if marked, err := locking.Marked(ctx, k); err != nil || !marked {
			t.Errorf("%s: marked %v (%v), want it marked for deletion", k, marked, err)
		}
	}
	for _, k := range neighbourObjects {
		if marked, err := locking.Marked(ctx, k); err != nil || marked {
			t.Errorf("the neighbour's %s: marked %v (%v), want it unmarked", k, marked, err)
		}
	}
	t.Logf("immutable bucket: backed up %d keys in %v, restored them; the entry was released with its %d snapshots locked and marked, the neighbour's %d unmarked",
		len(written), targetObjects, len(targetObjects), len(neighbourObjects))
}

// spBucket is the bucket provisioned from a service principal.
const spBucket = "etcdbr-azure-sp"

// rotate asks for a key rotation by annotation and waits until every shoot's etcd-backup
// secret carries a new key.
func (f *fixture) rotate(t *testing.T, bucketName string, shoots []shoot) {
	t.Helper()
	ctx := context.Background()
	before := map[string]string{}
	for _, s := range shoots {
		before[s.entry] = string(f.secret(t, s).Data[azure.KeyStorageKey])
	}
	b := &extensionsv1alpha1.BackupBucket{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: bucketName}, b); err != nil {
		t.Fatal(err)
	}
	base := b.DeepCopy()
	metav1.SetMetaDataAnnotation(&b.ObjectMeta, azure.AnnotationRotate, "true")
	if err := f.Client.Patch(ctx, b, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	f.Eventually(60*time.Second, "the rotated key in every etcd-backup secret", func() (bool, string) {
		for _, s := range shoots {
			if string(f.secret(t, s).Data[azure.KeyStorageKey]) == before[s.entry] {
				return false, s.entry + " still has the old key"
			}
		}
		return true, ""
	})
}

// in returns the fixture with the pipeline's waits failing t, a subtest, rather than the
// test that started the pipeline.
func (f *fixture) in(t *testing.T) *fixture {
	p := *f.Pipeline
	p.T = t
	sub := *f
	sub.Pipeline = &p
	return &sub
}

type fixture struct {
	*pipeline.Pipeline
	// dir is readable by uid 65532: binaries, the kubeconfig, the local buckets, etcd data.
	dir       string
	localRoot string
	providers objectstore.Registry
	// configs are the BackupBuckets' providerConfigs by type (nil: none).
	configs map[string][]byte
	etcdbr  *stack.EtcdBR
	// purgeExited says why the purge process is gone, or "" while it runs.
	purgeExited func() string
}

// start runs the pipeline with the bucket and entry functions in this process and the purge
// as a process of uid 65532.
func start(t *testing.T) *fixture {
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "housekeeper-etcdbr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cloud := azurecloud.New(spBucket)
	cloud.AddServicePrincipal("etcdbr-client", "etcdbr-client-secret")
	p := pipeline.Start(t, testenv.WithAzuriteAccounts(cloud.AzuriteAccounts()...), testenv.WithS3(), testenv.WithGCS(), testenv.WithSwift())
	f := &fixture{Pipeline: p, dir: dir, localRoot: filepath.Join(dir, "buckets"), configs: map[string][]byte{
		// As a seed's backup providerConfig: the bucket's, copied into its entries.
		gcs.Type: fmt.Appendf(nil, `{"apiVersion":"gcp.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","store":{"endpointOverride":%q}}`, p.Env.GCS.Endpoint),
	}}
	f.providers = objectstore.NewRegistry(local.New(f.localRoot), s3.New(), gcs.New(), swift.New(), azure.New(azure.WithManagementTransport(cloud.Transport()),
		azure.WithServiceURL(p.Env.Azurite.ServiceURL), azure.WithPollFrequency(10*time.Millisecond)))
	p.RunFunction(bucket.Definition, f.providers)
	p.RunFunction(entry.Definition, f.providers)
	f.startPurgeProcess(t)

	// The cache under $HOME is not reachable by uid 65532: run copies of the binaries.
	bin := filepath.Join(dir, "bin")
	for _, name := range []string{"etcd", "etcdbrctl"} {
		copyFile(t, filepath.Join(binDir, name), filepath.Join(bin, name), 0o755)
	}
	logs := f.logFile(t, "etcd-backup-restore.log")
	f.etcdbr = &stack.EtcdBR{BinDir: bin, Logs: logs, RunAs: etcdDruidCredential}

	f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "azure-credentials", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(p.Env.Azurite.Endpoint),
	}})
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-credentials", Namespace: "garden"}})
	key, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gcp-credentials", Namespace: "garden"}, Data: map[string][]byte{gcs.KeyServiceAccountJSON: key}})
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "openstack-credentials", Namespace: "garden"}, Data: map[string][]byte{
		swift.KeyAuthURL: []byte(p.Env.Swift.AuthURL), swift.KeyDomainName: []byte(stack.SwiftDomain), swift.KeyTenantName: []byte(stack.SwiftProject),
		swift.KeyUsername: []byte(stack.SwiftUser), swift.KeyPassword: []byte(stack.SwiftPassword),
	}})
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: "garden"}, Data: map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(p.Env.S3.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
	}})
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "azure-service-principal", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyTenantID: []byte("etcdbr-tenant"), azure.KeyClientID: []byte("etcdbr-client"),
		azure.KeyClientSecret: []byte("etcdbr-client-secret"), azure.KeySubscriptionID: []byte("etcdbr-subscription"),
	}})
	return f
}

// shoot is one BackupEntry with its control-plane namespace.
type shoot struct {
	entry, namespace string
}

// backupRestorePurge backs up two shoots of a new bucket (the target's first, then between
// runs, then the neighbour's), restores the target and purges it.
func (f *fixture) backupRestorePurge(t *testing.T, provider, bucketName, bucketSecret string, between func(*testing.T, ...shoot)) {
	ctx := context.Background()
	f.create(t, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: provider, ProviderConfig: f.providerConfig(provider)}, Region: region(provider),
			SecretRef: corev1.SecretReference{Name: bucketSecret, Namespace: "garden"},
		},
	})
	f.waitSucceeded(t, &extensionsv1alpha1.BackupBucket{}, bucketName)
	target := shoot{entry: "shoot--" + bucketName + "--0a1b2c3d", namespace: "shoot--" + bucketName}
	neighbour := shoot{entry: "shoot--" + bucketName + "-next--4e5f6a7b", namespace: "shoot--" + bucketName + "-next"}
	for _, s := range []shoot{target, neighbour} {
		f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}})
		f.create(t, &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: s.entry},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: provider, ProviderConfig: f.providerConfig(provider)}, BucketName: bucketName, Region: region(provider),
				SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
			},
		})
	}
	for _, s := range []shoot{target, neighbour} {
		f.waitSucceeded(t, &extensionsv1alpha1.BackupEntry{}, s.entry)
	}

	// Back up both shoots' etcds through their etcd-backup secrets: the target's with keys
	// in a full and in delta snapshots, the neighbour's with a full one.
	written, targetPrefix := f.backUp(t, provider, target, 3, 3)
	if between != nil {
		between(t, target, neighbour)
	}
	_, neighbourPrefix := f.backUp(t, provider, neighbour, 2, 0)
	bucketStore := f.bucket(t, provider, target)
	targetObjects := keysUnder(t, bucketStore, targetPrefix)
	neighbourObjects := keysUnder(t, bucketStore, neighbourPrefix)
	if len(targetObjects) == 0 || len(neighbourObjects) == 0 {
		t.Fatalf("snapshots: %d of the target, %d of the neighbour; want some of each", len(targetObjects), len(neighbourObjects))
	}
	everything := keysUnder(t, bucketStore, "")
	if want := slices.Sorted(slices.Values(append(slices.Clone(targetObjects), neighbourObjects...))); !slices.Equal(everything, want) {
		t.Fatalf("the bucket holds %v, want just the two shoots' snapshots %v", everything, want)
	}
	if provider == local.Type {
		f.checkWrittenAsEtcdDruidUser(t, bucketName, target.entry)
	}

	// Restore the target's etcd from its snapshots into a fresh data directory, with the
	// same secret, and read the keys back.
	got := f.restore(t, provider, target)
	if len(got) != len(written) {
		t.Errorf("restored %d keys, wrote %d: %v", len(got), len(written), got)
	}
	for k, v := range written {
		if got[k] != v {
			t.Errorf("restored %s = %q, wrote %q", k, got[k], v)
		}
	}
	t.Logf("%s: backed up %d keys in %d snapshots of %s (%v), restored them all", provider, len(written), len(targetObjects), target.entry, targetObjects)
	revision := f.drill(t, target, written, targetObjects)
	if provider == local.Type {
		f.drillCommand(t, target, revision)
	}

	// Delete the target's entry: the purge removes exactly its snapshots.
	e := &extensionsv1alpha1.BackupEntry{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: target.entry}, e); err != nil {
		t.Fatal(err)
	}
	if err := f.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	f.Eventually(90*time.Second, target.entry+" purged and gone", func() (bool, string) {
		if why := f.purgeExited(); why != "" {
			t.Fatal(why)
		}
		err := f.Client.Get(ctx, client.ObjectKey{Name: target.entry}, &extensionsv1alpha1.BackupEntry{})
		if err == nil {
			return false, "still there"
		}
		return strings.Contains(err.Error(), "not found"), err.Error()
	})
	if left := keysUnder(t, bucketStore, target.entry+"/"); len(left) != 0 {
		t.Errorf("%d objects of the purged entry left: %v", len(left), left)
	}
	if after := keysUnder(t, bucketStore, ""); !slices.Equal(after, neighbourObjects) {
		t.Errorf("after the purge the bucket holds %v, want exactly the neighbour's %v", after, neighbourObjects)
	}
	if provider == local.Type {
		if _, err := os.Lstat(filepath.Join(f.localRoot, bucketName, target.entry)); !os.IsNotExist(err) {
			t.Errorf("the purged entry's directory is still there: %v", err)
		}
	}
}

const keyPrefix = "/registry/etcdbr/"

// drill drills the shoot's backups as `housekeeper drill` does (the bucket opened as the purge
// opens it) and checks that they restore to exactly what was written, from every snapshot
// etcd-backup-restore wrote among objects (the full one and each delta; GCS and Swift also hold
// the chunks a snapshot was uploaded in, which are no snapshots).
func (f *fixture) drill(t *testing.T, s shoot, written map[string]string, objects []string) (revision int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := &extensionsv1alpha1.BackupEntry{}
	if err := f.Client.Get(ctx, client.ObjectKey{Name: s.entry}, be); err != nil {
		t.Fatal(err)
	}
	store, err := gardener.Buckets{Client: f.Client, Providers: f.providers}.Open(ctx, be)
	if err != nil {
		t.Fatal(err)
	}
	var restored map[string]string
	res, err := drill.Run(ctx, store, gardener.EtcdMainPrefix(s.entry)+"/", drill.Options{WorkDir: t.TempDir(),
		Check: func(ctx context.Context, c *clientv3.Client, revision int64) error {
			resp, err := c.Get(ctx, keyPrefix, clientv3.WithPrefix(), clientv3.WithRev(revision))
			if err != nil {
				return err
			}
			restored = map[string]string{}
			for _, kv := range resp.Kvs {
				restored[string(kv.Key)] = string(kv.Value)
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("drill of %s: %v", s.entry, err)
	}
	if !maps.Equal(restored, written) {
		t.Errorf("the drill restored %v, want what was written: %v", restored, written)
	}
	var snapshots []string
	for _, k := range objects {
		if base := path.Base(k); strings.HasPrefix(base, "Full-") || strings.HasPrefix(base, "Incr-") {
			snapshots = append(snapshots, k)
		}
	}
	if used := append([]string{res.Full}, res.Deltas...); !slices.Equal(used, snapshots) {
		t.Errorf("the drill restored %v, want every snapshot: %v", used, snapshots)
	}
	t.Logf("drill of %s: revision %d, %d keys, from %s and %d deltas", s.entry, res.Revision, res.Keys, res.Full, len(res.Deltas))
	return res.Revision
}

// drillCommand runs `housekeeper drill` on the shoot's entry as an operator would, and on an
// etcd that has no backups there: the first restores to revision, the second fails with exit
// code 1 and says why.
func (f *fixture) drillCommand(t *testing.T, s shoot, revision int64) {
	t.Helper()
	kubeconfig := filepath.Join(f.dir, "kubeconfig") // startPurgeProcess's
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"drill", "--entry", s.entry, "--kubeconfig", kubeconfig, "--local-root", f.localRoot}, args...), &out, &errOut, local.Plugin)
		return code, out.String() + errOut.String()
	}
	code, out := run()
	if want := fmt.Sprintf("revision %d ", revision); code != 0 || !strings.Contains(out, ": restorable\n") || !strings.Contains(out, want) {
		t.Errorf("housekeeper drill --entry %s: exit code %d, output:\n%s\nwant 0, restorable, %q", s.entry, code, out, want)
	}
	code, out = run("--etcd", "etcd-events", "--output", "json")
	var report struct {
		Restorable bool   `json:"restorable"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil {
		t.Fatalf("housekeeper drill --output json printed no report: %v\n%s", err, out)
	}
	if code != 1 || report.Restorable || !strings.Contains(report.Error, "no full snapshot") {
		t.Errorf("housekeeper drill of an etcd without backups: exit code %d, report %+v, want 1, not restorable, no full snapshot:\n%s", code, report, out)
	}
	t.Logf("housekeeper drill --entry %s:\n%s", s.entry, out)
}

// restore restores the shoot's etcd from its snapshots into a fresh data directory with
// etcdbrctl restore, configured from its etcd-backup secret, and returns the keys it holds.
func (f *fixture) restore(t *testing.T, provider string, s shoot) map[string]string {
	t.Helper()
	return f.restoreIn(t, provider, s, "restore")
}

// restoreIn is restore into its own directory, name, under the shoot's.
func (f *fixture) restoreIn(t *testing.T, provider string, s shoot, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(f.dir, s.entry, name)
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "data", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	store := f.backupStore(t, provider, s, filepath.Join(dir, "credentials"))
	restoreCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := f.etcdbr.Restore(restoreCtx, store, member, filepath.Join(dir, "data", "temp")); err != nil {
		t.Fatal(err)
	}
	restored, err := f.etcdbr.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Stop()
	got, err := restored.Get(ctx, keyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// backUp runs the shoot's etcd with etcdbrctl snapshot configured from its etcd-backup
// secret: full keys written before the first (full) snapshot, delta keys after it, and
// waits until a snapshot holds the last write. It returns what was written and the
// snapshots' key prefix.
func (f *fixture) backUp(t *testing.T, provider string, s shoot, full, delta int) (map[string]string, string) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(f.dir, s.entry, "backup")
	store := f.backupStore(t, provider, s, filepath.Join(dir, "credentials"))
	bucketStore := f.bucket(t, provider, s)
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "data", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := f.etcdbr.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	written := map[string]string{}
	var revision int64
	put := func(n int) {
		for range n {
			key := fmt.Sprintf("%s%s/%d", keyPrefix, s.entry, len(written))
			value := fmt.Sprintf("value %d of %s", len(written), s.entry)
			if revision, err = etcd.Put(ctx, key, value); err != nil {
				t.Fatal(err)
			}
			written[key] = value
		}
	}
	put(full)
	opts := snapshotOptions
	opts.TempDir = filepath.Join(dir, "data", "temp")
	snapshotter, err := f.etcdbr.StartSnapshotter(etcd, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer snapshotter.Stop()
	f.waitSnapshot(t, bucketStore, store.SnapshotPrefix(), "Full", revision)
	if delta > 0 {
		put(delta)
		f.waitSnapshot(t, bucketStore, store.SnapshotPrefix(), "Incr", revision)
	}
	return written, store.SnapshotPrefix()
}

// waitSnapshot waits until a snapshot of kind under prefix covers revision.
func (f *fixture) waitSnapshot(t *testing.T, bucketStore objectstore.Store, prefix, kind string, revision int64) {
	t.Helper()
	f.Eventually(60*time.Second, fmt.Sprintf("a %s snapshot under %s up to revision %d", kind, prefix, revision), func() (bool, string) {
		keys := keysUnder(t, bucketStore, prefix)
		for _, k := range keys {
			if s, ok := stack.ParseSnapshot(k); ok && s.Kind == kind && s.LastRevision >= revision {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%v", keys)
	})
}

// region is the spec.region of the provider's buckets and entries: Keystone's catalog has the
// stack's Swift in its own region.
func region(provider string) string {
	if provider == swift.Type {
		return stack.SwiftRegion
	}
	return "local"
}

// providerConfig is the providerConfig of the provider's buckets and entries, nil for none.
func (f *fixture) providerConfig(provider string) *runtime.RawExtension {
	if c := f.configs[provider]; c != nil {
		return &runtime.RawExtension{Raw: c}
	}
	return nil
}

// bucket opens the shoot's bucket through housekeeper's provider with the shoot's
// etcd-backup secret.
func (f *fixture) bucket(t *testing.T, provider string, s shoot) objectstore.Store {
	t.Helper()
	data := f.secret(t, s).Data
	return f.storeOf(t, provider, string(data[entry.DataKeyBucketName]), data)
}

// storeOf opens bucketName through housekeeper's provider with data, an etcd-backup secret's.
func (f *fixture) storeOf(t *testing.T, provider, bucketName string, data map[string][]byte) objectstore.Store {
	t.Helper()
	// The region etcd-backup-restore reads (aws, openstack), as the bucket function opens it.
	w := objectstore.Where{Type: provider, Region: string(data["region"]), Bucket: bucketName, Config: f.configs[provider]}
	_, store, err := f.providers.Open(w, data)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// backupStore is etcd-backup-restore's store configured from the shoot's etcd-backup secret,
// its data written as files into credentialsDir.
func (f *fixture) backupStore(t *testing.T, provider string, s shoot, credentialsDir string) *stack.BackupStore {
	t.Helper()
	data := f.secret(t, s).Data
	store, err := f.etcdbr.BackupStore(provider, string(data[entry.DataKeyBucketName]), gardener.EtcdMainPrefix(s.entry), data, credentialsDir)
	if err != nil {
		t.Fatal(err)
	}
	if provider == gcs.Type {
		store.EndpointOverride = f.Env.GCS.Endpoint // etcd-druid's, from provider-gcp's seed webhook
	}
	return store
}

// secret is the etcd-backup secret the entry function wrote into the shoot's namespace.
func (f *fixture) secret(t *testing.T, s shoot) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: entry.SecretName}, secret); err != nil {
		t.Fatalf("the etcd-backup secret of %s: %v", s.entry, err)
	}
	return secret
}

// checkWrittenAsEtcdDruidUser shows what the purge has to cope with: etcd-backup-restore's
// files are 0600 and its directories 0700, owned by uid 65532.
func (f *fixture) checkWrittenAsEtcdDruidUser(t *testing.T, bucketName, entryName string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(f.localRoot, bucketName, entryName), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != want || st.Uid != etcdDruidUser || st.Gid != etcdDruidUser {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", path, fi.Mode().Perm(), st.Uid, st.Gid, want, etcdDruidUser, etcdDruidUser)
		}
		n++
		return nil
	})
	if err != nil || n < 4 { // the entry, etcd-main, v2 and a snapshot at least
		t.Errorf("walked %d paths under the entry's directory: %v", n, err)
	}
}

func (f *fixture) waitSucceeded(t *testing.T, obj extensionsv1alpha1.Object, name string) {
	t.Helper()
	f.Eventually(60*time.Second, name+" Succeeded", func() (bool, string) {
		if err := f.Client.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
			return false, err.Error()
		}
		op := obj.GetExtensionStatus().GetLastOperation()
		if op == nil {
			return false, "no lastOperation"
		}
		return op.State == gardencorev1beta1.LastOperationStateSucceeded, fmt.Sprintf("%s/%s %q", op.Type, op.State, op.Description)
	})
}

func (f *fixture) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := f.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (f *fixture) logFile(t *testing.T, name string) *os.File {
	t.Helper()
	file, err := os.Create(filepath.Join(f.Env.LogDir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = file.Close() })
	return file
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
