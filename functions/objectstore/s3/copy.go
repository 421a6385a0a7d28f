package s3

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// MaxCopySize is the largest object one CopyObject copies (5 GiB); a larger one is
// objectstore.ErrObjectNotServerSide, and streamed.
const MaxCopySize = 5 << 30

var _ objectstore.ServerSideCopier = (*store)(nil)

// maxCopySize is MaxCopySize; tests lower it.
var maxCopySize int64 = MaxCopySize

// CopyFrom copies the object at key from src, a bucket at the same endpoint, with one
// CopyObject signed with this store's credentials, which must read src. It checks the key is
// free first (versitygw ignores If-None-Match on CopyObject, so the check is a HeadObject:
// the copy function is the only writer of its keys). The copy keeps the source's content and
// metadata, so its ETag is the MD5 the source's is (AWS computes it afresh for a copy of a
// multipart upload), and none of its tags: a source marked for deletion does not mark its
// copy. Its object lock is the destination bucket's default retention, as for an Upload.
func (s *store) CopyFrom(ctx context.Context, src objectstore.Store, key string) (objectstore.ObjectInfo, error) {
	from, ok := src.(*store)
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %w: the source is no S3 bucket", s.name, objectstore.ErrNotServerSide)
	}
	if a, b := aws.ToString(s.client.Options().BaseEndpoint), aws.ToString(from.client.Options().BaseEndpoint); a != b {
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %w: the source bucket %q is at another endpoint", s.name, objectstore.ErrNotServerSide, from.name)
	}
	info, err := from.Stat(ctx, key)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if info.Size > maxCopySize {
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %q (%d bytes): %w (CopyObject: %d bytes)", s.name, key, info.Size, objectstore.ErrObjectNotServerSide, maxCopySize)
	}
	switch _, err := s.Stat(ctx, key); {
	case err == nil:
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectExists)
	case !errors.Is(err, objectstore.ErrObjectNotFound):
		return objectstore.ObjectInfo{}, err
	}
	_, err = s.client.CopyObject(ctx, &awss3.CopyObjectInput{
		Bucket:     aws.String(s.name),
		Key:        aws.String(key),
		CopySource: aws.String(url.PathEscape(from.name) + "/" + escapeKey(key)),
		// The tags are the source's own business: its purge's deletion mark among them.
		TaggingDirective: types.TaggingDirectiveReplace,
	})
	if err != nil {
		err = classify(err)
		switch {
		case errors.Is(err, objectstore.ErrBucketNotFound) || isCode(err, "NoSuchKey"):
			// One of the two: which, the source tells.
			if _, serr := from.Stat(ctx, key); serr != nil {
				return objectstore.ObjectInfo{}, serr
			}
		case isCode(err, "NotImplemented") || errors.Is(err, objectstore.ErrUnauthorized):
			return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: copy %q from bucket %q: %w: %w", s.name, key, from.name, objectstore.ErrNotServerSide, err)
		}
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: copy %q from bucket %q: %w", s.name, key, from.name, err)
	}
	return s.Stat(ctx, key)
}

// escapeKey escapes each segment of key for the x-amz-copy-source header, keeping its slashes.
func escapeKey(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}
