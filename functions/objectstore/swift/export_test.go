package swift

// Test hooks for the external tests.
func WithListPageSize(n int) Option { return withListPageSize(n) }
func WithBatchSize(n int) Option    { return withBatchSize(n) }
func WithoutBulk() Option           { return withoutBulk() }
