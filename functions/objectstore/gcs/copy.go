package gcs

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var _ objectstore.ServerSideCopier = (*store)(nil)

// CopyFrom copies the object at key from src, a bucket at the same endpoint, with a rewrite
// signed with this store's credentials, which must read src; the library repeats the request
// with the rewrite token until the service is done (a large object, another location or
// storage class). It copies the generation the source's attributes name, and declines one
// with a custom time (objectstore.ErrObjectNotServerSide). An object at the key (a Stat
// first) is objectstore.ErrObjectExists. The copy has the source's content and hashes (md5Hash,
// crc32c); the bucket's retention policy applies to it as to an upload.
func (s *store) CopyFrom(ctx context.Context, src objectstore.Store, key string) (objectstore.ObjectInfo, error) {
	from, ok := src.(*store)
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %w: the source is no GCS bucket", s.name, objectstore.ErrNotServerSide)
	}
	if from.endpoint != s.endpoint {
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %w: the source bucket %q is at another endpoint", s.name, objectstore.ErrNotServerSide, from.name)
	}
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %w", s.name, err)
	}
	attrs, err := from.client.Bucket(from.name).Object(key).Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %q: %w", from.name, key, objectstore.ErrObjectNotFound)
	case err != nil:
		return objectstore.ObjectInfo{}, from.errorf(fmt.Sprintf("stat %q", key), err)
	case !attrs.CustomTime.IsZero():
		// provider-gcp's mark for deletion, which a rewrite may carry over and the
		// destination's lifecycle rule would act on; an upload carries none.
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %q has a custom time: %w", from.name, key, objectstore.ErrObjectNotServerSide)
	}
	switch _, err := s.Stat(ctx, key); {
	case err == nil:
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectExists)
	case !errors.Is(err, objectstore.ErrObjectNotFound):
		return objectstore.ObjectInfo{}, err
	}
	// ifGenerationMatch=0 too: GCS refuses the rewrite (412) should the key be written
	// meanwhile; fake-gcs-server ignores it.
	dst := s.client.Bucket(s.name).Object(key).If(storage.Conditions{DoesNotExist: true})
	attrs, err = dst.CopierFrom(s.client.Bucket(from.name).Object(key).Generation(attrs.Generation)).Run(ctx)
	op := fmt.Sprintf("copy %q from bucket %q", key, from.name)
	switch {
	case err == nil:
	case isStatus(err, http.StatusNotFound) || errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist):
		// The source object, its bucket or this one: the source tells which.
		if _, serr := from.Stat(ctx, key); serr != nil {
			return objectstore.ObjectInfo{}, serr
		}
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
	case isStatus(err, http.StatusForbidden):
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %s: %w: %w", s.name, op, objectstore.ErrNotServerSide, classify(err))
	default:
		return objectstore.ObjectInfo{}, s.errorf(op, err)
	}
	info := objectstore.ObjectInfo{Key: key, Size: attrs.Size}
	if len(attrs.MD5) == md5.Size {
		info.MD5 = attrs.MD5
	}
	return info, nil
}
