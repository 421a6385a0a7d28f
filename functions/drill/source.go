package drill

import (
	"context"
	"io"
)

// Source is what a drill reads: a bucket's keys and objects (an objectstore.Store is one). It is
// never written to.
type Source interface {
	// List calls fn with the keys under prefix (a plain string prefix), in pages; as
	// objectstore.Store's List.
	List(ctx context.Context, prefix string, fn func(keys []string) error) error
	// Open returns the object at key for reading; the caller closes it.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}
