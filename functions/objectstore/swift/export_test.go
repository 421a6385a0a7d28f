package swift

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Test hooks for the external tests.
func WithListPageSize(n int) Option { return withListPageSize(n) }
func WithBatchSize(n int) Option    { return withBatchSize(n) }
func WithoutBulk() Option           { return withoutBulk() }

// ObjectStorage is the store's authenticated client, to arrange what the store does not write
// (a large object's manifest).
func ObjectStorage(ctx context.Context, s objectstore.Store) (*gophercloud.ServiceClient, error) {
	return s.(*store).objectStorage(ctx)
}
