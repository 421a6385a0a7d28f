package entry_test

// The S3 counterpart of BenchmarkPurge, on a real S3 server (versitygw, posix backend). Like
// it, it measures once per call, whatever b.N, and prints a table on stdout.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// benchS3Sizes are the numbers of objects under benchPrefix purged.
var benchS3Sizes = []int{2000, 5000}

// benchS3Versions is how many versions each key has in the versioned bucket's row.
const benchS3Versions = 2

// s3OutsideKeys are outsideKeys for a posix-backed S3 server, where an object cannot share
// its name with a "directory" of others: "shoot--bench--s--1" itself becomes a neighbour.
var s3OutsideKeys = []string{
	"root.txt",
	"shoot--bench--s--1-neighbour",
	"shoot--bench--s--10/etcd-events/v2/Full-00000000-00000001-1700000000",
	"shoot--bench--s--10/etcd-main/v2/Full-00000000-00000001-1700000000",
}

// BenchmarkPurgeS3 measures DeletePrefix with the S3 provider (DeleteObjects, up to 1000 keys
// per request) against deleting one object per request, sequentially, after listing the
// prefix; and DeletePrefix on a versioned bucket, where every version and delete marker goes.
// The HTTP requests each sends during its measurement are counted: DeletePrefix needs
// ⌈N/1000⌉ DeleteObjects requests plus its list pages, against N deletes plus the list pages.
func BenchmarkPurgeS3(b *testing.B) {
	env := testenv.Start(b, testenv.WithS3())
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	creds := map[string][]byte{
		s3.KeyAccessKeyID:      []byte(stack.S3AccessKey),
		s3.KeySecretAccessKey:  []byte(stack.S3SecretKey),
		s3.KeyRegion:           []byte(stack.S3Region),
		s3.KeyEndpoint:         []byte(env.S3.Endpoint),
		s3.KeyS3ForcePathStyle: []byte("true"),
	}
	open := func(bucket string, opts ...s3.Option) objectstore.Store {
		s, err := s3.New(opts...).Open(bucket, creds)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	var purgeRequests, seqRequests requestCounter
	// setup creates, uploads and checks; its requests are not counted.
	setup, store := open(benchContainer), open(benchContainer, s3.WithHTTPClient(purgeRequests.client()))
	const versionedBucket = "purge-bench-versioned"
	vSetup, vStore := open(versionedBucket), open(versionedBucket, s3.WithHTTPClient(purgeRequests.client()))
	for _, s := range []objectstore.Store{setup, vSetup} {
		if err := s.Create(ctx); err != nil {
			b.Fatal(err)
		}
	}
	_, err := env.S3.Client(nil).PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{
		Bucket:                  aws.String(versionedBucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []objectstore.Store{setup, vSetup} {
		putObjects(ctx, b, s, s3OutsideKeys, 1)
	}
	seq := env.S3.Client(seqRequests.client())

	// Warm the server and the clients up.
	putObjects(ctx, b, setup, benchKeys(warmUpPrefix, warmUpBlobs), 1)
	if deleted, err := deletePrefix(ctx, store, warmUpPrefix); err != nil || deleted != warmUpBlobs {
		b.Fatalf("warming up: deleted %d of %d objects: %v", deleted, warmUpBlobs, err)
	}
	putObjects(ctx, b, setup, benchKeys(warmUpPrefix, warmUpBlobs), 1)
	if deleted, err := deleteEachObject(ctx, seq, benchContainer, warmUpPrefix); err != nil || deleted != warmUpBlobs {
		b.Fatalf("warming up: deleted %d of %d objects: %v", deleted, warmUpBlobs, err)
	}

	type row struct {
		n                   int
		purge, seq, version run
	}
	var rows []row
	measure := func(what string, n int, counter *requestCounter, s objectstore.Store, del func() (int, error)) run {
		counter.reset()
		start := time.Now()
		deleted, err := del()
		r := run{time.Since(start), counter.load()}
		if err != nil || deleted != n {
			b.Fatalf("%s of %d objects: deleted %d: %v", what, n, deleted, err)
		}
		checkBucket(ctx, b, s, what, n)
		return r
	}
	for _, n := range benchS3Sizes {
		keys := benchKeys(benchPrefix, n)
		r := row{n: n}
		putObjects(ctx, b, setup, keys, 1)
		r.purge = measure("DeletePrefix", n, &purgeRequests, setup, func() (int, error) {
			return deletePrefix(ctx, store, benchPrefix)
		})
		putObjects(ctx, b, setup, keys, 1)
		r.seq = measure("one delete per object", n, &seqRequests, setup, func() (int, error) {
			return deleteEachObject(ctx, seq, benchContainer, benchPrefix)
		})
		putObjects(ctx, b, vSetup, keys, benchS3Versions)
		r.version = measure("DeletePrefix on a versioned bucket", n, &purgeRequests, vSetup, func() (int, error) {
			return deletePrefix(ctx, vStore, benchPrefix)
		})
		rows = append(rows, r)
	}

	b.ReportMetric(0, "ns/op")
	for _, r := range rows {
		b.ReportMetric(r.purge.rate(r.n), fmt.Sprintf("purge-%d-objects/s", r.n))
		b.ReportMetric(r.seq.rate(r.n), fmt.Sprintf("seq-%d-objects/s", r.n))
		b.ReportMetric(float64(r.purge.requests), fmt.Sprintf("purge-%d-requests", r.n))
		b.ReportMetric(float64(r.seq.requests), fmt.Sprintf("seq-%d-requests", r.n))
		b.ReportMetric(float64(r.version.requests), fmt.Sprintf("purge-versioned-%d-requests", r.n))
	}
	fmt.Printf("\nPurge of a prefix on an S3 server (versitygw %s, posix backend): N objects under %s,\n"+
		"DeletePrefix with the s3 provider (DeleteObjects, %d keys per request) against listing the prefix and\n"+
		"deleting one object per request, sequentially; and DeletePrefix on a versioned bucket, %d versions per key.\n",
		versitygwVersion(b), benchPrefix, s3.MaxDeleteBatch, benchS3Versions)
	fmt.Printf("  %6s  %-40s %9s %9s %13s %9s\n", "N", "method", "seconds", "objects/s", "HTTP requests", "speed-up")
	for _, r := range rows {
		for _, m := range []struct {
			name string
			run  run
		}{
			{"DeletePrefix (DeleteObjects)", r.purge},
			{"one delete per object, sequentially", r.seq},
			{fmt.Sprintf("DeletePrefix, versioned (%d versions)", benchS3Versions*r.n), r.version},
		} {
			fmt.Printf("  %6d  %-40s %9.3f %9.0f %13d %8.1fx\n", r.n, m.name, m.run.elapsed.Seconds(), m.run.rate(r.n), m.run.requests,
				r.seq.elapsed.Seconds()/m.run.elapsed.Seconds())
		}
	}
}

func versitygwVersion(b *testing.B) string {
	v, err := stack.Versions()
	if err != nil {
		b.Fatal(err)
	}
	return v["VERSITYGW_VERSION"]
}

// putObjects writes versions versions of each key with uploadWorkers goroutines.
func putObjects(ctx context.Context, b *testing.B, s objectstore.Store, keys []string, versions int) {
	b.Helper()
	data := []byte(strings.Repeat("etcd snapshot ", 16))
	for range versions {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(uploadWorkers)
		for _, k := range keys {
			g.Go(func() error { return objectstore.PutBytes(gctx, s, k, data) })
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// deleteEachObject lists the prefix and deletes each object in a request of its own, one
// after another. It returns how many objects it deleted.
func deleteEachObject(ctx context.Context, c *awss3.Client, bucket, prefix string) (int, error) {
	pager := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	deleted := 0
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return deleted, err
		}
		for _, o := range page.Contents {
			_, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			var nsk *types.NoSuchKey
			if err != nil && !errors.As(err, &nsk) {
				return deleted, fmt.Errorf("deleting %s: %w", *o.Key, err)
			}
			deleted++
		}
	}
	return deleted, nil
}

// checkBucket fails the benchmark unless the bucket holds exactly s3OutsideKeys (in a versioned
// bucket: no version or delete marker left under the prefixes).
func checkBucket(ctx context.Context, b *testing.B, s objectstore.Store, method string, n int) {
	b.Helper()
	var left, outside []string
	err := s.List(ctx, "", func(keys []string) error {
		for _, k := range keys {
			if strings.HasPrefix(k, benchPrefix) || strings.HasPrefix(k, warmUpPrefix) {
				left = append(left, k)
			} else {
				outside = append(outside, k)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(left) > 0 {
		b.Fatalf("after %s of %d objects, %d are left under %s, e.g. %s", method, n, len(left), benchPrefix, left[0])
	}
	if want := slices.Sorted(slices.Values(s3OutsideKeys)); !slices.Equal(outside, want) {
		b.Fatalf("after %s of %d objects, the objects outside %s are %q, want %q untouched", method, n, benchPrefix, outside, want)
	}
}
