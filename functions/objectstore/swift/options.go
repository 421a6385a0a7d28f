package swift

import "net/http"

// MaxBulkDelete is the most names DeleteKeys puts into one bulk delete: fewer when the proxy's
// /info says it takes fewer (bulk_delete's max_deletes_per_request or max_failed_deletes), and
// no more when it takes more (Swift's default is 10,000; a smaller request keeps each one short).
const MaxBulkDelete = 1000

// MaxListPage is the most names one list request asks for.
const MaxListPage = 1000

// DefaultDeleteConcurrency is how many delete requests DeleteKeys has in flight by default.
const DefaultDeleteConcurrency = 4

// Option configures the provider and the stores it opens.
type Option func(*options)

type options struct {
	transport         http.RoundTripper
	deleteConcurrency int
	batchSize         int // tests only; MaxBulkDelete otherwise
	listPageSize      int // tests only; MaxListPage otherwise
	noBulk            bool
}

// WithTransport sends every request through t (to count requests, or a proxy); caCert and
// insecure in the credentials still apply when t is an *http.Transport.
func WithTransport(t http.RoundTripper) Option { return func(o *options) { o.transport = t } }

// WithDeleteConcurrency sets how many delete requests DeleteKeys sends at once (default
// DefaultDeleteConcurrency; values below 1 mean 1).
func WithDeleteConcurrency(n int) Option {
	return func(o *options) { o.deleteConcurrency = max(n, 1) }
}

// withBatchSize and withListPageSize shrink bulk deletes and list pages so tests can exercise
// splitting and paging with few objects; withoutBulk makes DeleteKeys send single deletes, as
// it does against a proxy without bulk delete.
func withBatchSize(n int) Option {
	return func(o *options) { o.batchSize = min(max(n, 1), MaxBulkDelete) }
}

func withListPageSize(n int) Option {
	return func(o *options) { o.listPageSize = min(max(n, 1), MaxListPage) }
}

func withoutBulk() Option { return func(o *options) { o.noBulk = true } }
