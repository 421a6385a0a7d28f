package entry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// An entry of an S3 bucket with object lock whose snapshots the lock still keeps: its deletion
// finishes at once (the entry is released, as upstream does, so that gardenlet and a migration
// go on), what can be deleted is, the locked snapshots are marked, and a verify purge fires
// when their lock ends and deletes them. A neighbour's locked snapshots, unmarked, stay.
func TestLockedSnapshotsArePurgedWhenTheLockEnds(t *testing.T) {
	t.Parallel() // its own stack, waiting most of the time: beside the other waiting tests
	p := pipeline.Start(t, testenv.WithS3())
	providers := objectstore.NewRegistry(s3.New())
	p.RunFunction(bucket.Definition, providers)
	p.RunFunction(entry.Definition, providers)
	p.RunFunction(entry.PurgeDefinition, providers)
	ctx := context.Background()
	const bucketName, target, neighbour = "locked-seed", "shoot--dev--locked--1", "shoot--dev--neighbour--2"
	create := func(obj client.Object) {
		t.Helper()
		if err := p.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	state := func(obj extensionsv1alpha1.Object, name string) string {
		if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err.Error()
		}
		if op := obj.GetExtensionStatus().GetLastOperation(); op != nil {
			return string(op.Type) + "/" + string(op.State)
		}
		return "no lastOperation"
	}

	// The bucket has object lock, as an operator's may; the function adopts it.
	raw := p.Env.S3.Client(nil)
	if _, err := raw.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucketName), ObjectLockEnabledForBucket: aws.Bool(true),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(stack.S3Region)}}); err != nil {
		t.Fatal(err)
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-creds", Namespace: "garden"}, Data: map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(p.Env.S3.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
	}})
	create(&extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"}, Region: stack.S3Region,
			SecretRef: corev1.SecretReference{Name: "s3-creds", Namespace: "garden"},
		},
	})
	p.Eventually(30*time.Second, "bucket Succeeded", func() (bool, string) {
		s := state(&extensionsv1alpha1.BackupBucket{}, bucketName)
		return strings.HasSuffix(s, "/Succeeded"), s
	})
	for _, name := range []string{target, neighbour} {
		create(&extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{entry.AnnotationRetention: "0s"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"}, BucketName: bucketName, Region: stack.S3Region,
				SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
			},
		})
		p.Eventually(30*time.Second, name+" Succeeded", func() (bool, string) {
			s := state(&extensionsv1alpha1.BackupEntry{}, name)
			return strings.HasSuffix(s, "/Succeeded"), s
		})
	}

	lockEnd := time.Now().Add(12 * time.Second).Truncate(time.Second)
	put := func(key string, locked bool) {
		t.Helper()
		in := &awss3.PutObjectInput{Bucket: aws.String(bucketName), Key: aws.String(key), Body: strings.NewReader("snapshot")}
		if locked {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(lockEnd)
		}
		if _, err := raw.PutObject(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	lockedKeys := snapshots(target+"/", 3)
	freeKeys := []string{target + "/etcd-main/v2/Incr-00000004-00000005-1700000004.gz", target + "/etcd-main/v2/Incr-00000005-00000006-1700000005.gz"}
	neighbourKeys := snapshots(neighbour+"/", 2)
	for _, k := range lockedKeys {
		put(k, true)
	}
	for _, k := range freeKeys {
		put(k, false)
	}
	for _, k := range neighbourKeys {
		put(k, true)
	}
	list := func(prefix string) []string {
		t.Helper()
		out, err := raw.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(bucketName), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		slices.Sort(keys)
		return keys
	}

	// The deletion finishes while the lock holds.
	e := &extensionsv1alpha1.BackupEntry{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: target}, e); err != nil {
		t.Fatal(err)
	}
	if err := p.Client.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	p.Eventually(30*time.Second, target+" released", func() (bool, string) {
		s := state(&extensionsv1alpha1.BackupEntry{}, target)
		return strings.Contains(s, "not found"), s
	})
	released := time.Now()
	if !released.Before(lockEnd) {
		t.Fatalf("the entry was released at %s, after the lock ended (%s): the test shows nothing", released, lockEnd)
	}
	if left := list(target + "/"); !slices.Equal(left, lockedKeys) {
		t.Fatalf("after the release %v is left under the prefix, want the locked snapshots %v", left, lockedKeys)
	}
	for _, k := range lockedKeys {
		tags, err := raw.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(bucketName), Key: aws.String(k)})
		if err != nil || !slices.ContainsFunc(tags.TagSet, func(tg types.Tag) bool { return aws.ToString(tg.Key) == s3.MarkTag }) {
			t.Errorf("%s is not marked for deletion: %v %v", k, tags, err)
		}
	}

	// When the lock ends, the verify purge deletes them.
	p.Eventually(60*time.Second, "the locked snapshots deleted after their lock", func() (bool, string) {
		left := list(target + "/")
		return len(left) == 0, strings.Join(left, ", ")
	})
	deleted := time.Now()
	if deleted.Before(lockEnd) {
		t.Errorf("the locked snapshots were gone at %s, before their lock ended at %s", deleted, lockEnd)
	}
	if got := list(neighbour + "/"); !slices.Equal(got, neighbourKeys) {
		t.Errorf("the neighbour holds %v, want its snapshots %v", got, neighbourKeys)
	}
	subject, err := events.Subject(events.TypePurgeVerified, target)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := p.JS.Stream(ctx, events.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	// The verify purge publishes its event after its last delete: the objects may be gone first.
	var msg *jetstream.RawStreamMsg
	p.Eventually(10*time.Second, "the "+events.TypePurgeVerified+" event", func() (bool, string) {
		msg, err = stream.GetLastMsgForSubject(ctx, subject)
		return err == nil, fmt.Sprint(err)
	})
	var data events.PurgeData
	if err := json.Unmarshal(msg.Data, &data); err != nil || data.Deleted != len(lockedKeys) || data.Locked != 0 {
		t.Errorf("verified event %s: %+v (%v), want %d deleted and none locked", msg.Data, data, err, len(lockedKeys))
	}
	families, err := p.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				counts[f.GetName()+"/"+l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if counts["housekeeper_purge_verifications_total/empty"] != 1 || counts["housekeeper_purge_verified_objects_total/deleted"] != float64(len(lockedKeys)) {
		t.Errorf("verify metrics %v: want one verification that found the prefix empty after deleting %d objects", counts, len(lockedKeys))
	}
	t.Logf("%d locked snapshots of %s: lock ended %s, entry released %s before it, snapshots deleted %s after it; %d free ones deleted at once; the neighbour's %d untouched",
		len(lockedKeys), target, lockEnd.Format(time.RFC3339), lockEnd.Sub(released).Round(time.Second), deleted.Sub(lockEnd).Round(time.Second), len(freeKeys), len(neighbourKeys))
}
