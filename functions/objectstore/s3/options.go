package s3

import "net/http"

// MaxDeleteBatch is the most keys S3 accepts in one DeleteObjects request.
const MaxDeleteBatch = 1000

// MaxListPage is the most keys (or versions) S3 returns in one list page.
const MaxListPage = 1000

// DefaultDeleteConcurrency is how many DeleteObjects requests DeleteKeys has in flight by
// default.
const DefaultDeleteConcurrency = 4

// Option configures the provider and the stores it opens.
type Option func(*options)

type options struct {
	httpClient        *http.Client
	deleteConcurrency int
	deleteBatchSize   int   // tests only; MaxDeleteBatch otherwise
	listPageSize      int32 // tests only; MaxListPage otherwise
	versioning        bool  // tests only: Create enables versioning
}

// WithHTTPClient sends every request through c (to count requests, set timeouts, a proxy or
// trusted CAs).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithDeleteConcurrency sets how many DeleteObjects requests DeleteKeys sends at once
// (default DefaultDeleteConcurrency; values below 1 mean 1).
func WithDeleteConcurrency(n int) Option {
	return func(o *options) { o.deleteConcurrency = max(n, 1) }
}

// withDeleteBatchSize and withListPageSize shrink delete requests and list pages so tests can
// exercise splitting and paging with few objects; withVersioning makes Create enable
// versioning on the bucket, so the conformance suite runs on versioned buckets too.
func withDeleteBatchSize(n int) Option {
	return func(o *options) { o.deleteBatchSize = min(max(n, 1), MaxDeleteBatch) }
}

func withListPageSize(n int32) Option {
	return func(o *options) { o.listPageSize = min(max(n, 1), MaxListPage) }
}

func withVersioning() Option { return func(o *options) { o.versioning = true } }
