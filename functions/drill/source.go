package drill

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Source is what a drill reads: a bucket's keys and objects. It is never written to.
type Source interface {
	// List calls fn with the keys under prefix (a plain string prefix), in pages; as
	// objectstore.Store's List.
	List(ctx context.Context, prefix string, fn func(keys []string) error) error
	// Open returns the object at key for reading; the caller closes it.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Dir is a Source over a directory: keys are the slash-separated paths of its regular files,
// as etcd-backup-restore's Local provider lays them out under $HOME/<container>.
type Dir string

// dirPageSize matches objectstore.MaxPageSize.
const dirPageSize = 5000

// List walks the directory and hands fn the keys under prefix in lexical order.
func (d Dir) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	root := string(d)
	// Walk only the deepest directory the prefix names in full.
	start := root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(root, filepath.FromSlash(prefix[:i]))
	}
	var keys []string
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == start && os.IsNotExist(err) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// WalkDir's order is lexical per directory, not across the whole key ("a/b" vs "a-c").
	slices.Sort(keys)
	for len(keys) > 0 {
		n := min(len(keys), dirPageSize)
		if err := fn(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// Open opens the file at key.
func (d Dir) Open(_ context.Context, key string) (io.ReadCloser, error) {
	if !fs.ValidPath(key) {
		return nil, &fs.PathError{Op: "open", Path: key, Err: fs.ErrInvalid}
	}
	return os.Open(filepath.Join(string(d), filepath.FromSlash(key)))
}
