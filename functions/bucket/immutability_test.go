package bucket_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// An aws BackupBucket whose providerConfig asks for immutability is created with object lock
// (a new snapshot cannot be deleted); a local one asking for it gets a configuration problem
// that names it.
func TestImmutableBucket(t *testing.T) {
	p := pipeline.Start(t, testenv.WithS3())
	p.RunFunction(bucket.Definition, objectstore.NewRegistry(s3.New(), local.New(t.TempDir())))
	f := &fixture{Pipeline: p}
	ctx := context.Background()
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	creds := map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(p.Env.S3.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
	}
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-creds", Namespace: "garden"}, Data: creds})
	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-creds", Namespace: "garden"}})
	immutable := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","immutability":{"retentionType":"bucket","retentionPeriod":"24h","mode":"governance"}}`)}

	b := newBucket("immutable-seed", "aws", "s3-creds")
	b.Spec.Region = stack.S3Region
	b.Spec.ProviderConfig = immutable
	f.create(b)
	b = f.waitSucceeded("immutable-seed")
	if d := b.Status.LastOperation.Description; !strings.Contains(d, "object lock set: GOVERNANCE for 1 days") {
		t.Errorf("description %q, want the object lock named", d)
	}
	store, err := s3.New().Open("immutable-seed", creds)
	if err != nil {
		t.Fatal(err)
	}
	const key = "shoot--i--s--1/etcd-main/v2/Full-1"
	if err := objectstore.PutBytes(ctx, store, key, []byte("snapshot")); err != nil {
		t.Fatal(err)
	}
	if failed, err := store.DeleteKeys(ctx, []string{key}); err != nil || !errors.Is(failed[key], objectstore.ErrObjectLocked) {
		t.Errorf("deleting a new snapshot: failed %v, err %v; want it locked", failed, err)
	}

	l := newBucket("immutable-local", "local", "local-creds")
	l.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"immutability":{"retentionType":"bucket","retentionPeriod":"24h"}}`)}
	f.create(l)
	f.waitError("immutable-local", "local buckets cannot be immutable", gardencorev1beta1.ErrorConfigurationProblem)
}
