package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Upload copies r into a temporary file beside the key's file ("."-prefixed, in the same
// directory), syncs it and renames it into place: the key holds the old file or the whole new
// one, never a part.
func (s *store) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := ValidateKey(key); err != nil {
		return 0, fmt.Errorf("local: bucket %q: %w", s.name, err)
	}
	root, err := s.open()
	if err != nil {
		return 0, err
	}
	defer root.Close()
	dir := path.Dir(key)
	if dir != "." {
		if err := root.MkdirAll(dir, dirPerm); err != nil {
			return 0, s.keyError("upload", key, err)
		}
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(dir, "."+path.Base(key)+".upload-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, filePerm)
	if err != nil {
		return 0, s.keyError("upload", key, err)
	}
	n, err := io.Copy(f, contextReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = root.Rename(tmp, key)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return n, s.keyError("upload", key, err)
	}
	return n, nil
}

// Stat reads the file's size.
func (s *store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("local: bucket %q: %w", s.name, err)
	}
	root, err := s.open()
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	defer root.Close()
	fi, err := root.Stat(key)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return objectstore.ObjectInfo{Key: key, Size: fi.Size()}, nil
	case err == nil, errors.Is(err, fs.ErrNotExist), missing(err):
		return objectstore.ObjectInfo{}, fmt.Errorf("local: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
	default:
		return objectstore.ObjectInfo{}, s.keyError("stat", key, err)
	}
}

// contextReader stops a copy when ctx is done.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
