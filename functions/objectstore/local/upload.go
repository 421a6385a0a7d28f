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
	"syscall"

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
	root, err := s.openRoot()
	if err != nil {
		return 0, err
	}
	defer root.Close()
	dir := path.Dir(key)
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(dir, "."+path.Base(key)+".upload-"+hex.EncodeToString(suffix[:]))
	// A concurrent DeleteKeys may prune the directory between its creation and the temporary
	// file's: retry. Once the file is there, the directory is not empty and stays.
	create := func() (*os.File, error) {
		if dir != "." {
			if err := root.MkdirAll(dir, dirPerm); err != nil {
				return nil, err
			}
		}
		return root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, filePerm)
	}
	f, err := create()
	for attempt := 1; errors.Is(err, fs.ErrNotExist) && attempt < 5; attempt++ {
		f, err = create()
	}
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
		if fi, statErr := root.Lstat(key); err != nil && statErr == nil && fi.IsDir() {
			// Over a directory, rename says only "file exists": say why, as writing into it does.
			err = &fs.PathError{Op: "rename", Path: key, Err: syscall.EISDIR}
		}
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
	root, err := s.openRoot()
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

// Open opens the file for reading; the os.Root it came through may close, the file stays open.
func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("local: bucket %q: %w", s.name, err)
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(key)
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("local: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return nil, s.keyError("open", key, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, s.keyError("open", key, err)
	case !fi.Mode().IsRegular():
		// A directory holds other keys and is no object, as Stat has it.
		f.Close()
		return nil, fmt.Errorf("local: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
	}
	return objectstore.ReadUntilDone(ctx, f), nil
}
