package azure

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Upload streams r into a block blob: blocks of objectstore.UploadPartSize, a few at once,
// committed as one list at the end, so a failed upload leaves no blob behind.
func (s *store) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("azure: container %q: %w", s.name, err)
	}
	counted := &objectstore.CountingReader{R: r}
	_, err := s.client.NewBlockBlobClient(key).UploadStream(ctx, counted, &blockblob.UploadStreamOptions{
		BlockSize: objectstore.UploadPartSize, Concurrency: objectstore.UploadConcurrency,
	})
	if err != nil {
		return counted.N, s.errorf(fmt.Sprintf("upload %q", key), err)
	}
	return counted.N, nil
}

// Stat reads the blob's properties; MD5 is its Content-MD5, which Azure computes for a blob
// written in one Put Blob (Upload of a body below one block) and which one committed from
// blocks (a larger Upload, etcd-backup-restore's) has only if its writer set it.
func (s *store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %w", s.name, err)
	}
	props, err := s.client.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound && !bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return objectstore.ObjectInfo{}, s.errorf(fmt.Sprintf("stat %q", key), err)
	}
	info := objectstore.ObjectInfo{Key: key}
	if props.ContentLength != nil {
		info.Size = *props.ContentLength
	}
	if len(props.ContentMD5) == md5.Size {
		info.MD5 = props.ContentMD5
	}
	return info, nil
}

// Open downloads the blob as a stream. A read that fails mid-way resumes where it stopped, a
// few times, with a ranged download of the same blob (its ETag): a snapshot of GiBs would
// otherwise fail whole on one broken connection.
func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("azure: container %q: %w", s.name, err)
	}
	resp, err := s.client.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound && !bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return nil, fmt.Errorf("azure: container %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return nil, s.errorf(fmt.Sprintf("open %q", key), err)
	}
	// EarlyCloseAsError: a Close by the caller ends the reading; it does not start a retry.
	r := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{EarlyCloseAsError: true})
	return objectstore.ReadUntilDone(ctx, objectstore.MapReadErrors(r, func(err error) error {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed {
			return fmt.Errorf("azure: container %q: %q: %w (HTTP 412 %s)", s.name, key, objectstore.ErrObjectChanged, re.ErrorCode)
		}
		return err
	})), nil
}
