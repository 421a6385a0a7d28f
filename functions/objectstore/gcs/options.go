package gcs

import "net/http"

// MaxBatch is the most calls GCS accepts in one batch request.
const MaxBatch = 100

// MaxListPage is the most objects GCS returns in one list page.
const MaxListPage = 1000

// DefaultDeleteConcurrency is how many batch requests (or, without the batch endpoint, single
// deletes) DeleteKeys has in flight by default.
const DefaultDeleteConcurrency = 4

// Option configures the provider and the stores it opens.
type Option func(*options)

type options struct {
	transport         http.RoundTripper
	deleteConcurrency int
	batchSize         int // tests only; MaxBatch otherwise
	listPageSize      int
	noBatch           bool
}

// WithTransport sends every request through t (to count requests, set timeouts, a proxy or
// trusted CAs); token exchanges included.
func WithTransport(t http.RoundTripper) Option { return func(o *options) { o.transport = t } }

// WithDeleteConcurrency sets how many delete requests DeleteKeys sends at once (default
// DefaultDeleteConcurrency; values below 1 mean 1).
func WithDeleteConcurrency(n int) Option {
	return func(o *options) { o.deleteConcurrency = max(n, 1) }
}

// WithListPageSize sets how many names a list page asks for (default and most MaxListPage):
// tests page with few objects.
func WithListPageSize(n int) Option {
	return func(o *options) { o.listPageSize = min(max(n, 1), MaxListPage) }
}

// withBatchSize shrinks batches so tests can exercise splitting with few objects;
// withoutBatch makes DeleteKeys send single deletes, as it does against a server without the
// batch endpoint.
func withBatchSize(n int) Option { return func(o *options) { o.batchSize = min(max(n, 1), MaxBatch) } }

func withoutBatch() Option { return func(o *options) { o.noBatch = true } }
