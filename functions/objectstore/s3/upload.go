package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Upload streams r with the SDK's upload manager: a multipart upload of parts of
// objectstore.UploadPartSize, a few at once, completed at the end (aborted on failure); a
// body smaller than one part is a single PutObject.
func (s *store) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("s3: bucket %q: %w", s.name, err)
	}
	counted := &objectstore.CountingReader{R: r}
	// The upload manager is deprecated in favour of feature/s3/transfermanager, which is still
	// v0.x; the manager is stable and does what is needed here.
	//lint:ignore SA1019 stable multipart uploader; its successor is pre-1.0
	uploader := manager.NewUploader(s.client, func(u *manager.Uploader) {
		u.PartSize = objectstore.UploadPartSize
		u.Concurrency = objectstore.UploadConcurrency
		u.LeavePartsOnError = false
	})
	//lint:ignore SA1019 see above
	_, err := uploader.Upload(ctx, &awss3.PutObjectInput{Bucket: aws.String(s.name), Key: aws.String(key), Body: counted})
	if err != nil {
		return counted.N, s.errorf(fmt.Sprintf("upload %q", key), err)
	}
	return counted.N, nil
}

// Stat sends HeadObject. Its ETag is the content's MD5 for an object written in one PutObject
// (Upload's body below one part) and encrypted, if at all, with SSE-S3; a multipart upload's
// ETag ("<hex>-<parts>"), SSE-KMS's and SSE-C's are not, and leave MD5 nil.
func (s *store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %w", s.name, err)
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.name), Key: aws.String(key)})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return objectstore.ObjectInfo{}, fmt.Errorf("s3: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return objectstore.ObjectInfo{}, s.errorf(fmt.Sprintf("stat %q", key), err)
	}
	info := objectstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength)}
	if out.SSECustomerAlgorithm == nil && (out.ServerSideEncryption == "" || out.ServerSideEncryption == types.ServerSideEncryptionAes256) {
		info.MD5 = objectstore.HexMD5(aws.ToString(out.ETag))
	}
	return info, nil
}

// Open sends GetObject and hands on its body, which the SDK streams from the connection. A read
// that breaks mid-way resumes where it stopped, a few times, with a GetObject of the rest of the
// same object (Range, If-Match its ETag): a snapshot of GiBs would otherwise fail whole on one
// broken connection.
func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("s3: bucket %q: %w", s.name, err)
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s.name), Key: aws.String(key)})
	if err != nil {
		return nil, s.getError(key, err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	reopen := func(ctx context.Context, offset int64, etag string) (objectstore.Part, error) {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{
			Bucket: aws.String(s.name), Key: aws.String(key),
			Range: aws.String(fmt.Sprintf("bytes=%d-", offset)), IfMatch: aws.String(etag),
		})
		if err != nil {
			return objectstore.Part{}, s.getError(key, err)
		}
		return objectstore.Part{Body: out.Body, ETag: aws.ToString(out.ETag), ContentRange: aws.ToString(out.ContentRange)}, nil
	}
	return objectstore.ReadResuming(ctx, out.Body, size, aws.ToString(out.ETag), reopen), nil
}

// getError is the error of a GetObject of key. Unlike HeadObject's, GetObject's 404 carries a
// code, which tells a missing bucket apart; 412 answers a resume's If-Match.
func (s *store) getError(key string, err error) error {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.HTTPStatusCode() == http.StatusNotFound && !isCode(err, "NoSuchBucket"):
			return fmt.Errorf("s3: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		case re.HTTPStatusCode() == http.StatusPreconditionFailed:
			return fmt.Errorf("s3: bucket %q: %q: %w (HTTP 412)", s.name, key, objectstore.ErrObjectChanged)
		}
	}
	return s.errorf(fmt.Sprintf("open %q", key), err)
}
