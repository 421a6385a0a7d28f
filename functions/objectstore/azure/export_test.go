package azure

import "github.com/housekeeper-dev/housekeeper/functions/objectstore"

// WithBatchSize is a test hook for the external tests.
func WithBatchSize(n int) Option { return withBatchSize(n) }

// ContainerURL is the URL a store sends its requests to.
func ContainerURL(s objectstore.Store) string { return s.(*store).client.URL() }
