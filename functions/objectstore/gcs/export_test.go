package gcs

// Test hooks for the external tests.
func WithBatchSize(n int) Option { return withBatchSize(n) }
func WithoutBatch() Option       { return withoutBatch() }
