package entry_test

// The GCS counterpart of BenchmarkPurge, on fake-gcs-server. Like it, it measures once per
// call, whatever b.N, and prints a table on stdout.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"golang.org/x/sync/errgroup"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// benchGCSSize is the number of objects under benchPrefix purged.
const benchGCSSize = 5000

// BenchmarkPurgeGCS measures DeletePrefix with the gcs provider (pages of 1000 names, batch
// requests of 100 deletes, 4 at once) against upstream provider-gcp's DeleteObjectsWithPrefix:
// the whole listing into memory, then one delete request per object, 10 at once. Both run on
// the same fake-gcs-server in the same run; the HTTP requests each sends are counted, and the
// heap each grows by is read before and after.
func BenchmarkPurgeGCS(b *testing.B) {
	env := testenv.Start(b, testenv.WithGCS())
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	key, err := stack.GCSServiceAccountKey()
	if err != nil {
		b.Fatal(err)
	}
	config := fmt.Appendf(nil, `{"kind":"BackupBucketConfig","store":{"endpointOverride":%q}}`, env.GCS.Endpoint)
	open := func(opts ...gcs.Option) objectstore.Store {
		_, s, err := objectstore.NewRegistry(gcs.New(opts...)).Open(objectstore.Where{Type: gcs.Type, Bucket: benchContainer, Config: config},
			map[string][]byte{gcs.KeyServiceAccountJSON: key})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	var purgeRequests, upstreamRequests requestCounter
	setup, store := open(), open(gcs.WithTransport(&purgeRequests))
	if err := setup.Create(ctx); err != nil {
		b.Fatal(err)
	}
	putObjects(ctx, b, setup, s3OutsideKeys, 1)
	upstream, err := storage.NewClient(ctx, option.WithEndpoint(env.GCS.Endpoint), option.WithHTTPClient(upstreamRequests.client()))
	if err != nil {
		b.Fatal(err)
	}
	defer upstream.Close()

	// Warm the server and the clients up.
	putObjects(ctx, b, setup, benchKeys(warmUpPrefix, warmUpBlobs), 1)
	if deleted, err := deletePrefix(ctx, store, warmUpPrefix); err != nil || deleted != warmUpBlobs {
		b.Fatalf("warming up: deleted %d of %d objects: %v", deleted, warmUpBlobs, err)
	}
	putObjects(ctx, b, setup, benchKeys(warmUpPrefix, warmUpBlobs), 1)
	if deleted, err := upstreamDeleteObjectsWithPrefix(ctx, upstream, benchContainer, warmUpPrefix); err != nil || deleted != warmUpBlobs {
		b.Fatalf("warming up: deleted %d of %d objects: %v", deleted, warmUpBlobs, err)
	}

	type result struct {
		run
		heap uint64
	}
	measure := func(what string, counter *requestCounter, del func() (int, error)) result {
		putObjects(ctx, b, setup, benchKeys(benchPrefix, benchGCSSize), 1)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		counter.reset()
		start := time.Now()
		deleted, err := del()
		r := result{run: run{time.Since(start), counter.load()}}
		runtime.ReadMemStats(&after)
		r.heap = after.TotalAlloc - before.TotalAlloc
		if err != nil || deleted != benchGCSSize {
			b.Fatalf("%s of %d objects: deleted %d: %v", what, benchGCSSize, deleted, err)
		}
		checkBucket(ctx, b, setup, what, benchGCSSize)
		return r
	}
	purge := measure("DeletePrefix", &purgeRequests, func() (int, error) { return deletePrefix(ctx, store, benchPrefix) })
	up := measure("upstream's DeleteObjectsWithPrefix", &upstreamRequests, func() (int, error) {
		return upstreamDeleteObjectsWithPrefix(ctx, upstream, benchContainer, benchPrefix)
	})

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(purge.rate(benchGCSSize), "purge-objects/s")
	b.ReportMetric(up.rate(benchGCSSize), "upstream-objects/s")
	b.ReportMetric(float64(purge.requests), "purge-requests")
	b.ReportMetric(float64(up.requests), "upstream-requests")
	fmt.Printf("\nPurge of a prefix on a GCS server (fake-gcs-server %s, memory backend): %d objects under %s,\n"+
		"DeletePrefix with the gcs provider (pages of %d names, batches of %d deletes, %d at once) against upstream\n"+
		"provider-gcp's DeleteObjectsWithPrefix (the whole listing in memory, one delete per object, 10 at once).\n",
		fakeGCSVersion(b), benchGCSSize, benchPrefix, gcs.MaxListPage, gcs.MaxBatch, gcs.DefaultDeleteConcurrency)
	fmt.Printf("  %-40s %9s %9s %13s %14s %9s\n", "method", "seconds", "objects/s", "HTTP requests", "allocated MiB", "speed-up")
	for _, m := range []struct {
		name string
		r    result
	}{{"DeletePrefix (batch)", purge}, {"upstream DeleteObjectsWithPrefix", up}} {
		fmt.Printf("  %-40s %9.3f %9.0f %13d %14.1f %8.1fx\n", m.name, m.r.elapsed.Seconds(), m.r.rate(benchGCSSize), m.r.requests,
			float64(m.r.heap)/(1<<20), up.elapsed.Seconds()/m.r.elapsed.Seconds())
	}
}

func fakeGCSVersion(b *testing.B) string {
	v, err := stack.Versions()
	if err != nil {
		b.Fatal(err)
	}
	return v["FAKE_GCS_SERVER_VERSION"]
}

// upstreamDeleteObjectsWithPrefix is what provider-gcp's storage client does (pkg/gcp/client,
// DeleteObjectsWithPrefix) without its retention branch: list every object under prefix into
// memory, then delete each in a request of its own, ten at once. It returns how many objects
// it deleted.
func upstreamDeleteObjectsWithPrefix(ctx context.Context, c *storage.Client, bucket, prefix string) (int, error) {
	h := c.Bucket(bucket)
	var objects []*storage.ObjectAttrs
	it := h.Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return 0, err
		}
		objects = append(objects, attrs)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(10)
	for _, o := range objects {
		g.Go(func() error {
			if err := h.Object(o.Name).Delete(gctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
				return err
			}
			return nil
		})
	}
	return len(objects), g.Wait()
}
