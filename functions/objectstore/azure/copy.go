package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var _ objectstore.ServerSideCopier = (*store)(nil)

// sourceSASValidity is how long the read-only SAS of a source blob is valid: Azure reads the
// source with it for as long as the copy is pending, hours for a large blob across regions.
const sourceSASValidity = 24 * time.Hour

// cleanupTimeout bounds the removal of a copy that did not succeed, which runs even when the
// caller's context has ended.
const cleanupTimeout = time.Minute

// CopyFrom copies the blob at key from src with Copy Blob (StartCopyFromURL), the source
// named by a read-only SAS of that one blob made with src's key, so that a container of
// another storage account copies as one of the same (Azure, not housekeeper, reads the source;
// the SAS is never logged). If-None-Match: * keeps an existing blob (objectstore.ErrObjectExists).
// A pending copy is polled until done; one that fails, or is still pending when ctx ends, is
// aborted and its blob removed. The copy has the source's content, properties (Content-MD5)
// and metadata, no tags (the source's deletion mark stays with it), and falls under the
// container's immutability policy as an upload does. A source the service cannot read
// (CannotVerifyCopySource, 403) is objectstore.ErrNotServerSide.
func (s *store) CopyFrom(ctx context.Context, src objectstore.Store, key string) (objectstore.ObjectInfo, error) {
	from, ok := src.(*store)
	if !ok {
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %w: the source is no Azure container", s.name, objectstore.ErrNotServerSide)
	}
	if _, err := from.Stat(ctx, key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	source, err := from.client.NewBlobClient(key).GetSASURL(sas.BlobPermissions{Read: true}, time.Now().Add(sourceSASValidity), nil)
	if err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %w: the source container %q issues no SAS", s.name, objectstore.ErrNotServerSide, from.name)
	}
	op := fmt.Sprintf("copy %q from container %q", key, from.name)
	dst := s.client.NewBlobClient(key)
	resp, err := dst.StartCopyFromURL(ctx, source, &blob.StartCopyFromURLOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}},
	})
	var re *azcore.ResponseError
	switch {
	case err == nil:
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %q: %w", s.name, key, objectstore.ErrObjectExists)
	case bloberror.HasCode(err, bloberror.CannotVerifyCopySource),
		errors.As(err, &re) && re.StatusCode == http.StatusForbidden && !authenticationFailed(re):
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %s: %w: %w", s.name, op, objectstore.ErrNotServerSide, classify(err))
	default:
		return objectstore.ObjectInfo{}, s.errorf(op, err)
	}
	status, description := deref(resp.CopyStatus), ""
	for status == blob.CopyStatusTypePending {
		select {
		case <-ctx.Done():
			s.removeCopy(ctx, key, resp.CopyID)
			return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %s: still pending: %w", s.name, op, ctx.Err())
		case <-time.After(s.opts.pollFrequency):
		}
		props, err := dst.GetProperties(ctx, nil)
		if err != nil {
			s.removeCopy(ctx, key, resp.CopyID)
			return objectstore.ObjectInfo{}, s.errorf(op+": reading its progress", err)
		}
		status, description = deref(props.CopyStatus), deref(props.CopyStatusDescription)
	}
	if status != blob.CopyStatusTypeSuccess {
		s.removeCopy(ctx, key, resp.CopyID)
		return objectstore.ObjectInfo{}, fmt.Errorf("azure: container %q: %s: the copy ended %s %s", s.name, op, status, description)
	}
	return s.Stat(ctx, key)
}

// removeCopy aborts a copy that did not succeed and removes its blob, whose content is not the
// source's; best effort: a copy that could not be removed fails verification at the caller.
func (s *store) removeCopy(ctx context.Context, key string, copyID *string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	b := s.client.NewBlobClient(key)
	if copyID != nil {
		_, _ = b.AbortCopyFromURL(rctx, *copyID, nil) // one that has ended cannot be aborted
	}
	_, _ = b.Delete(rctx, nil)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
