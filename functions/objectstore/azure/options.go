package azure

import (
	"net/http"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// MaxBatchSize is the most sub-requests Azure accepts in one Blob Batch request.
const MaxBatchSize = 256

// DefaultBatchConcurrency is how many batch requests DeleteKeys has in flight by default.
const DefaultBatchConcurrency = 4

// Option configures the provider and the stores it opens.
type Option func(*options)

type options struct {
	httpClient       *http.Client
	batchConcurrency int
	batchSize        int   // tests only; MaxBatchSize otherwise
	listPageSize     int32 // objectstore.MaxPageSize unless WithListPageSize
}

// WithHTTPClient sends every request through c (to count requests, set timeouts or a proxy).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithBatchConcurrency sets how many Blob Batch requests DeleteKeys sends at once (default
// DefaultBatchConcurrency; values below 1 mean 1).
func WithBatchConcurrency(n int) Option {
	return func(o *options) { o.batchConcurrency = max(n, 1) }
}

// WithListPageSize sets how many keys a List page (and so a purge round) holds: at most
// objectstore.MaxPageSize, the default; values below 1 mean 1. Smaller pages bound the work
// lost when a purge is interrupted, at the cost of more list requests.
func WithListPageSize(n int) Option {
	return func(o *options) { o.listPageSize = int32(min(max(n, 1), objectstore.MaxPageSize)) }
}

// withBatchSize shrinks batches so tests can exercise splitting with few blobs.
func withBatchSize(n int) Option {
	return func(o *options) { o.batchSize = min(max(n, 1), MaxBatchSize) }
}
