package entry_test

// A benchmark against a real Azurite, like the Azure provider's tests. It measures once per
// call, whatever b.N: uploading thousands of blobs dwarfs the measurement, so under the default
// -benchtime the framework stops at b.N == 1. The built-in ns/op (set-up included) is
// suppressed; the metrics and the table printed on stdout are the results.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const (
	// benchPrefix is the entry whose backups are purged.
	benchPrefix    = "shoot--bench--s--1/"
	benchContainer = "purge-bench"
	// uploadWorkers upload the blobs concurrently before each measurement.
	uploadWorkers = 16
	// benchKeyRetries is what the purge function passes to DeletePrefix.
	benchKeyRetries = 3
	// warmUpPrefix holds warmUpBlobs (more than one batch) for the warm-up of both methods.
	warmUpPrefix = "shoot--warmup--s--1/"
	warmUpBlobs  = 300
	// benchWait bounds the whole benchmark.
	benchWait = 2 * time.Minute
)

// benchSizes are the numbers of blobs under benchPrefix purged.
var benchSizes = []int{500, 2000}

// outsideKeys must survive every purge of benchPrefix: a blob at the root, one named like the
// prefix without its slash, and the backups of an entry whose name extends the prefix's.
var outsideKeys = []string{
	"root.txt",
	"shoot--bench--s--1",
	"shoot--bench--s--10/etcd-events/v2/Full-00000000-00000001-1700000000",
	"shoot--bench--s--10/etcd-main/v2/Full-00000000-00000001-1700000000",
}

// BenchmarkPurge measures DeletePrefix with the Azure provider (Blob Batch: up to 256 deletes
// per request, several requests at once) against the way upstream provider-azure purges a
// BackupEntry: list the prefix, then delete one blob per request, sequentially. Both run on
// the same Azurite, on the same N blobs, uploaded afresh for each; the HTTP requests each sends
// during its measurement are counted.
func BenchmarkPurge(b *testing.B) {
	env := testenv.Start(b, testenv.WithAzurite())
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()

	cred, err := azblob.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	if err != nil {
		b.Fatal(err)
	}
	// setup uploads and checks; its requests are not counted.
	setup, err := azblob.NewClientWithSharedKeyCredential(env.Azurite.Endpoint, cred, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := setup.CreateContainer(ctx, benchContainer, nil); err != nil {
		b.Fatal(err)
	}
	uploadBlobs(ctx, b, setup, outsideKeys)

	var purgeRequests, seqRequests requestCounter
	store, err := azure.New(azure.WithHTTPClient(purgeRequests.client())).Open(benchContainer, map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(env.Azurite.Endpoint),
	})
	if err != nil {
		b.Fatal(err)
	}
	seq, err := azblob.NewClientWithSharedKeyCredential(env.Azurite.Endpoint, cred,
		&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: seqRequests.client()}})
	if err != nil {
		b.Fatal(err)
	}

	// Warm Azurite and both clients up, so that neither measurement pays for the first batch or
	// delete request Azurite serves (its code paths are compiled on first use).
	for _, warm := range []func() (int, error){
		func() (int, error) { return deletePrefix(ctx, store, warmUpPrefix) },
		func() (int, error) { return deleteSequentially(ctx, seq, benchContainer, warmUpPrefix) },
	} {
		uploadBlobs(ctx, b, setup, benchKeys(warmUpPrefix, warmUpBlobs))
		if deleted, err := warm(); err != nil || deleted != warmUpBlobs {
			b.Fatalf("warming up: deleted %d of %d blobs: %v", deleted, warmUpBlobs, err)
		}
	}
	checkContainer(ctx, b, setup, "warming up", warmUpBlobs)

	type row struct {
		n          int
		uploaded   time.Duration // the N blobs, for one of the two runs
		purge, seq run
	}
	var rows []row
	for _, n := range benchSizes {
		keys := benchKeys(benchPrefix, n)
		r := row{n: n}

		start := time.Now()
		uploadBlobs(ctx, b, setup, keys)
		r.uploaded = time.Since(start)
		purgeRequests.reset()
		start = time.Now()
		deleted, err := deletePrefix(ctx, store, benchPrefix)
		r.purge = run{time.Since(start), purgeRequests.load()}
		if err != nil {
			b.Fatalf("DeletePrefix of %d blobs: %v", n, err)
		}
		if deleted != n {
			b.Fatalf("DeletePrefix deleted %d blobs, want %d", deleted, n)
		}
		checkContainer(ctx, b, setup, "DeletePrefix", n)

		uploadBlobs(ctx, b, setup, keys)
		seqRequests.reset()
		start = time.Now()
		deleted, err = deleteSequentially(ctx, seq, benchContainer, benchPrefix)
		r.seq = run{time.Since(start), seqRequests.load()}
		if err != nil {
			b.Fatalf("sequential delete of %d blobs: %v", n, err)
		}
		if deleted != n {
			b.Fatalf("sequential delete deleted %d blobs, want %d", deleted, n)
		}
		checkContainer(ctx, b, setup, "the sequential delete", n)

		rows = append(rows, r)
	}

	b.ReportMetric(0, "ns/op")
	for _, r := range rows {
		b.ReportMetric(r.purge.rate(r.n), fmt.Sprintf("purge-%d-blobs/s", r.n))
		b.ReportMetric(r.seq.rate(r.n), fmt.Sprintf("seq-%d-blobs/s", r.n))
		b.ReportMetric(float64(r.purge.requests), fmt.Sprintf("purge-%d-requests", r.n))
		b.ReportMetric(float64(r.seq.requests), fmt.Sprintf("seq-%d-requests", r.n))
		b.ReportMetric(r.seq.elapsed.Seconds()/r.purge.elapsed.Seconds(), fmt.Sprintf("purge/seq-%d-speedup", r.n))
	}

	fmt.Printf("\nPurge of a prefix on Azurite: N blobs under %s (uploaded afresh with %d goroutines before each run),\n"+
		"DeletePrefix with the azure provider (Blob Batch, %d deletes per request, %d requests at once) against\n"+
		"upstream provider-azure's loop (list the prefix, one delete per blob, sequentially). Same Azurite.\n",
		benchPrefix, uploadWorkers, azure.MaxBatchSize, azure.DefaultBatchConcurrency)
	fmt.Printf("  %6s  %-34s %9s %9s %13s %9s\n", "N", "method", "seconds", "blobs/s", "HTTP requests", "speed-up")
	for _, r := range rows {
		fmt.Printf("  %6d  %-34s %9.3f %9.0f %13d %8.1fx\n", r.n, "DeletePrefix (Blob Batch)",
			r.purge.elapsed.Seconds(), r.purge.rate(r.n), r.purge.requests, r.seq.elapsed.Seconds()/r.purge.elapsed.Seconds())
		fmt.Printf("  %6d  %-34s %9.3f %9.0f %13d %8.1fx\n", r.n, "sequential, one delete per blob",
			r.seq.elapsed.Seconds(), r.seq.rate(r.n), r.seq.requests, 1.0)
	}
	for _, r := range rows {
		fmt.Printf("  (uploading %d blobs took %.1fs)\n", r.n, r.uploaded.Seconds())
	}
}

// run is one measured deletion.
type run struct {
	elapsed  time.Duration
	requests int64
}

func (r run) rate(n int) float64 { return float64(n) / r.elapsed.Seconds() }

// requestCounter is an http.RoundTripper that counts the requests it sends.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func (c *requestCounter) client() *http.Client { return &http.Client{Transport: c} }
func (c *requestCounter) reset()               { c.n.Store(0) }
func (c *requestCounter) load() int64          { return c.n.Load() }

// benchKeys are n full snapshots under prefix, named as etcd-backup-restore names them.
func benchKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%setcd-main/v2/Full-%08d-%08d-%d", prefix, i*1000, i*1000+999, 1700000000+i)
	}
	return keys
}

// uploadBlobs uploads a small blob for each key with uploadWorkers goroutines.
func uploadBlobs(ctx context.Context, b *testing.B, c *azblob.Client, keys []string) {
	b.Helper()
	data := []byte(strings.Repeat("etcd snapshot ", 16))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(uploadWorkers)
	for _, k := range keys {
		g.Go(func() error {
			if _, err := c.UploadBuffer(gctx, benchContainer, k, data, nil); err != nil {
				return fmt.Errorf("uploading %s: %w", k, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// deleteSequentially is upstream provider-azure's purge of a BackupEntry: list the prefix
// and delete each blob, with its snapshots, in a request of its own, one after another; a
// blob that is already gone counts as deleted. It returns how many blobs it deleted.
func deleteSequentially(ctx context.Context, c *azblob.Client, containerName, prefix string) (int, error) {
	pager := c.NewListBlobsFlatPager(containerName, &azblob.ListBlobsFlatOptions{
		Prefix:     to.Ptr(prefix),
		MaxResults: to.Ptr[int32](5000),
	})
	deleted := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return deleted, err
		}
		for _, item := range page.Segment.BlobItems {
			_, err := c.DeleteBlob(ctx, containerName, *item.Name, &azblob.DeleteBlobOptions{
				DeleteSnapshots: to.Ptr(azblob.DeleteSnapshotsOptionTypeInclude),
			})
			if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
				return deleted, fmt.Errorf("deleting %s: %w", *item.Name, err)
			}
			deleted++
		}
	}
	return deleted, nil
}

// checkContainer fails the benchmark unless the container holds exactly outsideKeys: nothing
// left under benchPrefix (or the warm-up's prefix), nothing outside them deleted.
func checkContainer(ctx context.Context, b *testing.B, c *azblob.Client, method string, n int) {
	b.Helper()
	var left, outside []string
	pager := c.NewListBlobsFlatPager(benchContainer, &azblob.ListBlobsFlatOptions{MaxResults: to.Ptr[int32](5000)})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, item := range page.Segment.BlobItems {
			if strings.HasPrefix(*item.Name, benchPrefix) || strings.HasPrefix(*item.Name, warmUpPrefix) {
				left = append(left, *item.Name)
			} else {
				outside = append(outside, *item.Name)
			}
		}
	}
	if len(left) > 0 {
		b.Fatalf("after %s of %d blobs, %d are left under %s, e.g. %s", method, n, len(left), benchPrefix, left[0])
	}
	slices.Sort(outside)
	if want := slices.Sorted(slices.Values(outsideKeys)); !slices.Equal(outside, want) {
		b.Fatalf("after %s of %d blobs, the blobs outside %s are %q, want %q untouched", method, n, benchPrefix, outside, want)
	}
}

// deletePrefix is entry.DeletePrefix reduced to the count the benches compare.
func deletePrefix(ctx context.Context, store objectstore.Store, prefix string) (int, error) {
	purged, err := entry.DeletePrefix(ctx, store, prefix, entry.DeleteOptions{Retries: benchKeyRetries})
	return purged.Deleted, err
}
