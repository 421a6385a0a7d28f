package copy_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	copyfn "github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// A BackupCopyPolicy copies between providers on their real servers: Azurite to versitygw,
// versitygw to fake-gcs-server, local to Swift behind Keystone. Each source bucket holds, under
// its entry's prefix, the snapshots etcd-backup-restore wrote (a full and deltas) and an object
// of more than one upload part; the destination is a BackupDestination of the other type, with
// its endpoint (aws, gcp: a URL without the JSON API's path) or region (openstack) in its spec.
// A run on demand copies every object byte for byte, says so in the status and removes the
// annotation; a second run copies nothing.
func TestCopyAcrossProviders(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithAzurite(), testenv.WithS3(), testenv.WithGCS(), testenv.WithSwift())
	c := env.Client(t)
	ctx := t.Context()
	root := t.TempDir()
	reg := objectstore.NewRegistry(local.New(root), s3.New(), gcs.New(), swift.New(), azure.New())
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})

	gcsKey, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	// The credentials of each type, as a BackupBucket's secret has them; a destination's
	// endpoint and region are in its spec instead.
	secrets := map[string]map[string][]byte{
		azure.Type: {azure.KeyStorageAccount: []byte(stack.AzuriteAccount), azure.KeyStorageKey: []byte(stack.AzuriteKey),
			azure.KeyEndpoint: []byte(env.Azurite.Endpoint)},
		s3.Type: {s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
			s3.KeyS3ForcePathStyle: []byte("true")},
		gcs.Type: {gcs.KeyServiceAccountJSON: gcsKey},
		swift.Type: {swift.KeyAuthURL: []byte(env.Swift.AuthURL), swift.KeyDomainName: []byte(stack.SwiftDomain),
			swift.KeyTenantName: []byte(stack.SwiftProject), swift.KeyUsername: []byte(stack.SwiftUser), swift.KeyPassword: []byte(stack.SwiftPassword)},
		local.Type: {},
	}
	for typ, data := range secrets {
		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: typ}, Data: data})
	}
	bucketRegion := map[string]string{azure.Type: "westeurope", s3.Type: stack.S3Region, local.Type: "local"}
	// The source bucket's own credentials: the aws bucket's endpoint is in its secret.
	sourceCredentials := func(typ string) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range secrets[typ] {
			data[k] = v
		}
		if typ == s3.Type {
			data[s3.KeyEndpoint] = []byte(env.S3.Endpoint)
			create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "source-" + typ}, Data: data})
		}
		return data
	}
	destinationSpec := map[string]backupv1alpha1.BackupDestinationSpec{
		s3.Type:    {Type: backupv1alpha1.DestinationAWS, Endpoint: env.S3.Endpoint, Region: stack.S3Region},
		gcs.Type:   {Type: backupv1alpha1.DestinationGCP, Endpoint: env.GCS.URL},
		swift.Type: {Type: backupv1alpha1.DestinationOpenStack, Region: stack.SwiftRegion},
	}

	// What etcd-backup-restore wrote for one etcd: the objects each source's entry holds, under
	// <entry>/etcd-main/, beside an object of more than one upload part.
	written := t.TempDir()
	testenv.BackUpEtcd(t, env.LogDir, written, "scratch", "etcd-main")
	snapshots := map[string][]byte{}
	err = filepath.WalkDir(filepath.Join(written, "scratch"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(filepath.Join(written, "scratch"), path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		snapshots[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil || len(snapshots) < 2 {
		t.Fatalf("etcd-backup-restore's snapshots: %d (%v)", len(snapshots), err)
	}
	snapshots["etcd-main/v2/Full-00000000-00000200-1764500000"] = content("large", objectstore.UploadPartSize+17)

	for _, tc := range []struct{ from, to string }{
		{azure.Type, s3.Type},
		{s3.Type, gcs.Type},
		{local.Type, swift.Type},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			bucketName := "from-" + tc.from
			entryName := "shoot--dev--" + tc.from + uid
			// The source: a BackupBucket with its secret, an entry with objects under its prefix.
			secretName := tc.from
			srcCreds := sourceCredentials(tc.from)
			if tc.from == s3.Type {
				secretName = "source-" + tc.from
			}
			ref := corev1.SecretReference{Namespace: "garden", Name: secretName}
			create(&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName},
				Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: tc.from},
					Region: bucketRegion[tc.from], SecretRef: ref}})
			create(&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName},
				Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: tc.from},
					BucketName: bucketName, Region: bucketRegion[tc.from], SecretRef: ref}})
			_, src, err := reg.Open(objectstore.Where{Type: tc.from, Region: bucketRegion[tc.from], Bucket: bucketName}, srcCreds)
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Create(ctx); err != nil {
				t.Fatal(err)
			}
			var wantKeys []string
			var wantBytes int64
			for rel, body := range snapshots {
				key := entryName + "/" + rel
				if err := objectstore.PutBytes(ctx, src, key, body); err != nil {
					t.Fatal(err)
				}
				wantKeys = append(wantKeys, key)
				wantBytes += int64(len(body))
			}
			slices.Sort(wantKeys)

			// The destination, of the other type, opened as the copy function opens it.
			spec := destinationSpec[tc.to]
			spec.Bucket = "copies-" + tc.from
			spec.CredentialsSecretRef = &backupv1alpha1.SecretReference{Namespace: "garden", Name: tc.to}
			create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: spec.Bucket}, Spec: spec})
			dst, _, err := destination.Open(ctx, c, reg, spec.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Create(ctx); err != nil {
				t.Fatal(err)
			}

			policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "to-" + tc.to,
				Annotations: map[string]string{gardener.AnnotationOperation: copyfn.RunNow}},
				Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{bucketName}},
					Destination: spec.Bucket, Schedule: "@hourly"}}
			create(policy)
			cp := &copyfn.Copier{Client: c, Providers: reg, Log: zaptest.NewLogger(t), Now: time.Now}
			runNow := func(t *testing.T) *backupv1alpha1.EntryCopyResult {
				t.Helper()
				live := &backupv1alpha1.BackupCopyPolicy{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(policy), live); err != nil {
					t.Fatal(err)
				}
				e, err := events.NewObjectEvent("test", events.OpUpdated, kube.Ref(events.KindBackupCopyPolicy, live), []byte(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				if err := cp.Handle(ctx, e); err != nil {
					t.Fatal(err)
				}
				if err := c.Get(ctx, client.ObjectKeyFromObject(policy), live); err != nil {
					t.Fatal(err)
				}
				if _, ok := live.Annotations[gardener.AnnotationOperation]; ok {
					t.Errorf("the annotation is left: %v", live.Annotations)
				}
				condition(t, live, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionTrue, backupv1alpha1.ReasonAllCopied)
				if live.Status.Entries != 1 || live.Status.Failed != 0 || len(live.Status.Results) != 1 {
					t.Fatalf("status %+v", live.Status)
				}
				r := live.Status.Results[0]
				if r.Entry != entryName || r.Bucket != bucketName || !r.Complete || r.Reason != "" || len(r.Failures) != 0 {
					t.Errorf("result %+v", r)
				}
				return &r
			}

			if r := runNow(t); r.Objects != int64(len(wantKeys)) || r.Bytes != wantBytes || r.Skipped != 0 {
				t.Errorf("the first run copied %d objects, %d bytes, skipped %d; want %d, %d, 0", r.Objects, r.Bytes, r.Skipped, len(wantKeys), wantBytes)
			}
			if got := keys(t, dst); !slices.Equal(got, wantKeys) {
				t.Fatalf("the copy holds\n%q\nwant\n%q", got, wantKeys)
			}
			if got := keys(t, src); !slices.Equal(got, wantKeys) {
				t.Fatalf("the source holds\n%q\nwant\n%q", got, wantKeys)
			}
			for _, key := range wantKeys {
				if a, b := read(t, src, key), read(t, dst, key); !bytes.Equal(a, b) || !bytes.Equal(a, snapshots[key[len(entryName)+1:]]) {
					t.Errorf("%s: the copy (%d bytes) differs from the source (%d bytes)", key, len(b), len(a))
				}
			}

			// Asked again: everything is there, nothing is copied.
			live := &backupv1alpha1.BackupCopyPolicy{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(policy), live); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(live.DeepCopy())
			metav1.SetMetaDataAnnotation(&live.ObjectMeta, gardener.AnnotationOperation, copyfn.RunNow)
			if err := c.Patch(ctx, live, patch); err != nil {
				t.Fatal(err)
			}
			if r := runNow(t); r.Objects != 0 || r.Bytes != 0 || r.Skipped != int64(len(wantKeys)) {
				t.Errorf("the second run copied %d objects, %d bytes, skipped %d; want 0, 0, %d", r.Objects, r.Bytes, r.Skipped, len(wantKeys))
			}
		})
	}
}
