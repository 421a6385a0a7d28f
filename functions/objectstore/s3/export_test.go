package s3

import (
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Test hooks for the external tests.
func WithListPageSize(n int32) Option  { return withListPageSize(n) }
func WithDeleteBatchSize(n int) Option { return withDeleteBatchSize(n) }
func WithVersioning() Option           { return withVersioning() }

// Region is the region a store signs for and creates its bucket in.
func Region(s objectstore.Store) string { return s.(*store).region }

// SetMaxCopySize lowers the largest object CopyFrom copies until the test ends.
func SetMaxCopySize(t testing.TB, n int64) {
	old := maxCopySize
	maxCopySize = n
	t.Cleanup(func() { maxCopySize = old })
}
