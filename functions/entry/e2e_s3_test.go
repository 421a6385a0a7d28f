package entry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The whole path on a real S3 server, as Gardener drives provider aws: a BackupBucket of type
// aws whose region is spec.region, the generated secret and etcd-backup holding the keys
// etcd-backup-restore's S3 snapstore reads, snapshots written with them into a versioned
// bucket, and a purge that leaves no version or delete marker under the entry's prefix and
// touches nothing outside it. In a bucket with object lock, a locked snapshot no longer holds
// the deletion: the entry is released at once with the snapshot marked for deletion, and a
// verify purge is scheduled for the end of its lock (locked_test.go follows one to its end).
func TestS3PurgeOfVersionsAndObjectLock(t *testing.T) {
	p := pipeline.Start(t, testenv.WithS3())
	providers := objectstore.NewRegistry(azure.New(), s3.New())
	p.RunFunction(bucket.Definition, providers)
	p.RunFunction(entry.Definition, providers)
	p.RunFunction(entry.PurgeDefinition, providers)
	f := &fixture{Pipeline: p}
	ctx := context.Background()
	admin := p.Env.S3.Client(nil)

	// The seed's credentials carry no region: spec.region supplies it.
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: "garden"}, Data: map[string][]byte{
		s3.KeyAccessKeyID:      []byte(stack.S3AccessKey),
		s3.KeySecretAccessKey:  []byte(stack.S3SecretKey + "\n"),
		s3.KeyEndpoint:         []byte(p.Env.S3.Endpoint),
		s3.KeyS3ForcePathStyle: []byte("true"),
	}})
	// The locked bucket exists already, with object lock, as an operator made it.
	const lockedBucket = "locked-backups"
	if _, err := admin.CreateBucket(ctx, &awss3.CreateBucketInput{
		Bucket: aws.String(lockedBucket), ObjectLockEnabledForBucket: aws.Bool(true),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(stack.S3Region)},
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bucketName, lockedBucket} {
		f.create(&extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type}, Region: stack.S3Region,
				SecretRef: corev1.SecretReference{Name: "s3-credentials", Namespace: "garden"},
			},
		})
		f.waitState(&extensionsv1alpha1.BackupBucket{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	}
	if _, err := admin.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucketName),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatal(err)
	}
	generated := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: bucket.GeneratedSecretPrefix + bucketName}, generated); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		s3.KeyAccessKeyID: stack.S3AccessKey, s3.KeySecretAccessKey: stack.S3SecretKey, s3.KeyRegion: stack.S3Region,
		s3.KeyEndpoint: p.Env.S3.Endpoint, s3.KeyS3ForcePathStyle: "true",
	}
	if len(generated.Data) != len(want) {
		t.Errorf("generated secret has keys %v, want those of %v", slices.Sorted(maps.Keys(generated.Data)), slices.Sorted(maps.Keys(want)))
	}
	for k, v := range want {
		if string(generated.Data[k]) != v {
			t.Errorf("generated secret: %s is not as etcd-backup-restore must read it (trimmed, region from spec)", k)
		}
	}

	newS3Entry := func(name, bucketName string) *extensionsv1alpha1.BackupEntry {
		return &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{entry.AnnotationForceDeletion: "true"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: s3.Type}, BucketName: bucketName, Region: stack.S3Region,
				SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
			},
		}
	}
	const name = "shoot--dev--s3--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--s3"}})
	e := newS3Entry(name, bucketName)
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)

	// An entry over raw credentials that name no region: etcd-backup carries spec.region, as
	// provider-aws writes it.
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--s3raw"}})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "raw-s3-credentials"},
		Data: map[string][]byte{s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey)}})
	raw := newS3Entry("shoot--dev--s3raw--1", bucketName)
	raw.Spec.Region, raw.Spec.SecretRef.Name = "eu-central-1", "raw-s3-credentials"
	f.create(raw)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, raw.Name, gardencorev1beta1.LastOperationStateSucceeded)
	rawSecret := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--s3raw", Name: "etcd-backup"}, rawSecret); err != nil {
		t.Fatal(err)
	}
	if got := string(rawSecret.Data[s3.KeyRegion]); got != "eu-central-1" {
		t.Errorf("etcd-backup of an entry over credentials without a region: region %q, want spec.region eu-central-1", got)
	}

	// etcd-backup-restore's view: a client made from the etcd-backup secret alone.
	secret := &corev1.Secret{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--s3", Name: "etcd-backup"}, secret); err != nil {
		t.Fatal(err)
	}
	etcd := awss3.New(awss3.Options{
		Region:       string(secret.Data["region"]),
		BaseEndpoint: aws.String(string(secret.Data["endpoint"])),
		UsePathStyle: string(secret.Data["s3ForcePathStyle"]) == "true",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: string(secret.Data["accessKeyID"]), SecretAccessKey: string(secret.Data["secretAccessKey"])}, nil
		}),
	})
	container := string(secret.Data["bucketName"])
	write := func(key string) {
		t.Helper()
		if _, err := etcd.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(container), Key: aws.String(key), Body: strings.NewReader("snapshot")}); err != nil {
			t.Fatalf("writing %s with the etcd-backup secret: %v", key, err)
		}
	}
	inside := snapshots(name+"/", 30)
	for _, k := range inside {
		write(k)
	}
	write(inside[0]) // a second version
	// etcd-backup-restore's garbage collection deleted one: a delete marker over a version.
	if _, err := etcd.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(container), Key: aws.String(inside[1])}); err != nil {
		t.Fatal(err)
	}
	outside := slices.Concat(snapshots(name+"0/", 3), snapshots("shoot--dev--s3--10/", 3), []string{"root-object"})
	for _, k := range outside {
		write(k)
	}
	if n := countVersions(t, admin, bucketName, name+"/"); n != 32 {
		t.Fatalf("%d versions and delete markers under the prefix, want 32", n)
	}

	f.delete(e)
	f.waitGone(name)
	if n := countVersions(t, admin, bucketName, name+"/"); n != 0 {
		t.Errorf("%d versions or delete markers left under %s/ after the purge", n, name)
	}
	if n := countVersions(t, admin, bucketName, ""); n != len(outside) {
		t.Errorf("%d versions left in the bucket, want the %d outside the prefix", n, len(outside))
	}

	// Object lock.
	const lockedName = "shoot--dev--locked--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--locked"}})
	le := newS3Entry(lockedName, lockedBucket)
	f.create(le)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, lockedName, gardencorev1beta1.LastOperationStateSucceeded)
	lockedKey := lockedName + "/etcd-main/v2/Full-00000000-00000001-1700000000"
	if _, err := admin.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: aws.String(lockedBucket), Key: aws.String(lockedKey), Body: strings.NewReader("immutable"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(time.Hour)),
	}); err != nil {
		t.Fatal(err)
	}
	f.delete(le)
	f.waitGone(lockedName)
	if n := countVersions(t, admin, lockedBucket, lockedName+"/"); n != 1 {
		t.Errorf("%d versions under the released entry's prefix, want the locked one", n)
	}
	tags, err := admin.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(lockedBucket), Key: aws.String(lockedKey)})
	if err != nil || !slices.ContainsFunc(tags.TagSet, func(tg types.Tag) bool {
		return aws.ToString(tg.Key) == s3.MarkTag && aws.ToString(tg.Value) == s3.MarkValue
	}) {
		t.Errorf("the locked snapshot is not marked for deletion: %+v %v", tags, err)
	}
	subject, err := events.Subject(events.TypePurgeCompleted, lockedName)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := f.JS.Stream(ctx, events.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("no purge completed event for %s: %v", lockedName, err)
	}
	var data events.PurgeData
	if err := json.Unmarshal(msg.Data, &data); err != nil || data.Locked != 1 || time.Until(data.LockedUntil) < 50*time.Minute {
		t.Errorf("purge completed: %s, want 1 locked until about an hour from now", msg.Data)
	}
}

// countVersions counts the versions and delete markers under prefix.
func countVersions(t *testing.T, c *awss3.Client, bucket, prefix string) int {
	t.Helper()
	n := 0
	pager := awss3.NewListObjectVersionsPaginator(c, &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(fmt.Errorf("listing versions under %q: %w", prefix, err))
		}
		n += len(page.Versions) + len(page.DeleteMarkers)
	}
	return n
}
