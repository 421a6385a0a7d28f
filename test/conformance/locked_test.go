package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// lockedBucket is the immutable S3 bucket of the locked-source scenario.
const lockedBucket = "hk-s3-locked"

// s3Side is an S3 server (versitygw) for housekeeper's processes, started once.
type s3Side struct {
	once   sync.Once
	err    error
	server *stack.S3
}

func (s *s3Side) start(t *testing.T, l *logs) error {
	s.once.Do(func() {
		s.server, s.err = stack.StartS3(t.TempDir(), l.file(t, "versitygw.log"))
		if s.err == nil {
			t.Cleanup(s.server.Stop)
		}
	})
	return s.err
}

// 9-locked-source-entry: the step of a control-plane migration that hung upstream until the
// providers let it through. An immutable S3 bucket (providerConfig.immutability) holds a shoot's
// snapshots under object lock; the destination seed's source- entry over that prefix is
// force-deleted, as gardenlet does after the copy, and its deletion finishes while the lock
// still holds: the snapshots stay, marked for deletion. Once the lock has ended, deleting the
// shoot's own entry empties the prefix.
func (r *run) lockedSourceEntry(t *testing.T) {
	hk, ok := r.ext.(housekeeper)
	if !ok {
		t.Skipf("%s serves type local only, which has no object lock", r.ext.name())
	}
	ctx := context.Background()
	sv := hk.s3.server
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: r.ns},
		Data: map[string][]byte{
			s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
			s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(sv.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
		},
	}
	if err := r.g.client.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	d := r.deployProviderBucket(t, lockedBucket, s3.Type, stack.S3Region, creds,
		`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","immutability":{"mode":"governance","retentionPeriod":"24h","retentionType":"bucket"},"kind":"BackupBucketConfig"}`)
	raw := hk.s3.server.Client(nil)
	lock, err := raw.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String(lockedBucket)})
	if err != nil || lock.ObjectLockConfiguration.Rule == nil || aws.ToInt32(lock.ObjectLockConfiguration.Rule.DefaultRetention.Days) != 1 {
		t.Fatalf("the bucket's object lock: %+v, %v; want a default retention of 1 day", lock, err)
	}

	shoot := r.shoot(t, "nine", gardencorev1beta1.ShootPurposeEvaluation, r.src, r.dst)
	e := &entryRef{name: technicalID(shoot) + "--" + string(shoot.UID), shoot: shoot, seed: r.src}
	e.deployer = r.entryDeployer(shoot, e.name, r.src.name, lockedBucket)
	if err := e.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.expectEntrySucceeded(t, e)

	// Snapshots locked for a short while (an explicit retention overrides the bucket's day).
	lockEnd := time.Now().Add(25 * time.Second).Truncate(time.Second)
	var keys []string
	for i := range 3 {
		key := fmt.Sprintf("%s/etcd-main/v2/Full-%08d-%08d-%d.gz", e.name, i, i+1, time.Now().Unix())
		if _, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(lockedBucket), Key: aws.String(key), Body: strings.NewReader("snapshot"),
			ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(lockEnd)}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	list := func() []string {
		out, err := raw.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(lockedBucket), Prefix: aws.String(e.name + "/")})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range out.Contents {
			ks = append(ks, aws.ToString(o.Key))
		}
		slices.Sort(ks)
		return ks
	}

	// The destination seed's source- entry over the locked prefix, force-deleted.
	sourceName := v1beta1constants.BackupSourcePrefix + "-" + e.name
	source := &entryRef{name: sourceName, shoot: shoot, seed: r.dst, deployer: r.entryDeployer(shoot, sourceName, r.dst.name, lockedBucket)}
	if err := source.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.expectEntrySucceeded(t, source)
	if err := source.deployer.SetForceDeletionAnnotation(ctx); err != nil {
		t.Fatal(err)
	}
	if err := source.deployer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitCleanup(t, source)
	finished := time.Now()
	if !finished.Before(lockEnd) {
		t.Fatalf("the source- entry's deletion finished at %s, after the lock ended at %s: the scenario shows nothing", finished, lockEnd)
	}
	if left := list(); !slices.Equal(left, keys) {
		t.Fatalf("after the source- entry's deletion the prefix holds %v, want the locked snapshots %v", left, keys)
	}
	for _, k := range keys {
		tags, err := raw.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(lockedBucket), Key: aws.String(k)})
		if err != nil || !slices.ContainsFunc(tags.TagSet, func(tg types.Tag) bool { return aws.ToString(tg.Key) == s3.MarkTag }) {
			t.Errorf("%s is not marked for deletion: %v", k, err)
		}
	}

	// After the lock, the shoot's deletion empties the prefix.
	time.Sleep(time.Until(lockEnd.Add(time.Second)))
	r.destroyEntry(t, e)
	r.eventually(t, "the prefix empty after the lock", func() error {
		if left := list(); len(left) > 0 {
			return errors.New(strings.Join(left, ", "))
		}
		return nil
	})
	r.destroyProviderBucket(t, d, lockedBucket)
	t.Logf("source- entry over %d locked snapshots force-deleted in %s, %s before the lock ended; the snapshots stayed, marked, and went with the shoot's entry after the lock",
		len(keys), finished.Sub(lockEnd.Add(-25*time.Second)).Round(time.Second), lockEnd.Sub(finished).Round(time.Second))
}
