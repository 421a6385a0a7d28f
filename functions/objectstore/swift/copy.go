package swift

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var _ objectstore.ServerSideCopier = (*store)(nil)

// CopyFrom copies the object at key from src, a container of the same account (one storage
// URL), with a PUT carrying X-Copy-From. An object at the key (a Stat first) is
// objectstore.ErrObjectExists: the copy middleware applies If-None-Match to its read of the
// source, not to the write. A large-object manifest is copied as its content, one object,
// up to the proxy's max_file_size; a larger one is objectstore.ErrObjectNotServerSide (413).
// A container of another account or cluster is objectstore.ErrNotServerSide.
func (s *store) CopyFrom(ctx context.Context, src objectstore.Store, key string) (objectstore.ObjectInfo, error) {
	from, ok := src.(*store)
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %w: the source is no Swift container", s.name, objectstore.ErrNotServerSide)
	}
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %w", s.name, err)
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	fc, err := from.objectStorage(ctx)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if c.Endpoint != fc.Endpoint {
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %w: the source container %q is in another account", s.name, objectstore.ErrNotServerSide, from.name)
	}
	switch _, err := s.Stat(ctx, key); {
	case err == nil:
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %q: %w", s.name, key, objectstore.ErrObjectExists)
	case !errors.Is(err, objectstore.ErrObjectNotFound):
		return objectstore.ObjectInfo{}, err
	}
	op := fmt.Sprintf("copy %q from container %q", key, from.name)
	_, err = c.Request(ctx, http.MethodPut, c.ServiceURL(url.PathEscape(s.name), url.PathEscape(key)), &gophercloud.RequestOpts{
		MoreHeaders: map[string]string{
			"X-Copy-From":    "/" + url.PathEscape(from.name) + "/" + url.PathEscape(key),
			"Content-Length": "0",
		},
		OkCodes: []int{http.StatusCreated},
	})
	switch {
	case err == nil:
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		// The source object, its container or this one: the source tells which.
		if _, serr := from.Stat(ctx, key); serr != nil {
			return objectstore.ObjectInfo{}, serr
		}
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
	case gophercloud.ResponseCodeIs(err, http.StatusRequestEntityTooLarge):
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %s: %w (HTTP 413)", s.name, op, objectstore.ErrObjectNotServerSide)
	case gophercloud.ResponseCodeIs(err, http.StatusForbidden):
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %s: %w: %w", s.name, op, objectstore.ErrNotServerSide, classify(err))
	default:
		return objectstore.ObjectInfo{}, s.errorf(op, err)
	}
	return s.Stat(ctx, key)
}
