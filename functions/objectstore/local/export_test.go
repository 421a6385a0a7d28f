package local

// WithPageSize exposes the page-size hook to the external tests.
func WithPageSize(n int) Option { return withPageSize(n) }
