package azure

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// store is one blob container.
type store struct {
	name   string
	client *container.Client
	opts   options
}

var _ objectstore.Store = (*store)(nil)

func (s *store) errorf(op string, err error) error {
	return fmt.Errorf("azure: container %q: %s: %w", s.name, op, classify(err))
}

// Create creates the container; one that exists already is fine.
func (s *store) Create(ctx context.Context) error {
	_, err := s.client.Create(ctx, nil)
	if err == nil || bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil
	}
	return s.errorf("create", err)
}

// Delete deletes the container with everything in it; a missing one is fine. Azure finishes
// the deletion in the background: for a while, creating a container of the same name fails
// with ContainerBeingDeleted (HTTP 409, unclassified: retry later). A container with an
// immutability policy is emptied first: blobs still under retention are marked for deletion
// and make it an *objectstore.LockedError that says until when.
func (s *store) Delete(ctx context.Context) error {
	days, err := s.retentionDays(ctx)
	switch {
	case errors.Is(err, objectstore.ErrBucketNotFound):
		return nil
	case err != nil:
		return err
	case days > 0:
		if err := objectstore.EmptyOrMark(ctx, s, s.name); err != nil {
			return fmt.Errorf("azure: container %q: delete: %w", s.name, err)
		}
	}
	_, err = s.client.Delete(ctx, nil)
	if err == nil || bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return nil
	}
	return s.errorf("delete", err)
}

// List lists the blobs under prefix flat (no delimiter), page by page in the service's order,
// which is lexical.
func (s *store) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	opts := &container.ListBlobsFlatOptions{MaxResults: to.Ptr(s.opts.listPageSize)}
	if prefix != "" {
		opts.Prefix = to.Ptr(prefix)
	}
	pager := s.client.NewListBlobsFlatPager(opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return s.errorf(fmt.Sprintf("list %q", prefix), err)
		}
		var keys []string
		if page.Segment != nil {
			keys = make([]string, 0, len(page.Segment.BlobItems))
			for _, item := range page.Segment.BlobItems {
				if item != nil && item.Name != nil {
					keys = append(keys, *item.Name)
				}
			}
		}
		// Azure may return empty pages with a continuation marker; never hand those on, and
		// never more than a page's worth at once.
		for len(keys) > 0 {
			n := min(len(keys), int(s.opts.listPageSize))
			if err := fn(keys[:n:n]); err != nil {
				return err
			}
			keys = keys[n:]
		}
	}
	return nil
}

// DeleteKeys deletes keys (and their snapshots) with Blob Batch requests of at most 256
// deletes, up to the configured number at once. Each sub-response is checked: BlobNotFound
// counts as deleted; any other failure lands in failed. A batch request that fails as a whole
// fails its keys, except when the failure concerns every key alike — a missing container,
// rejected credentials, a cancelled context — which fails the call.
func (s *store) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	todo, failed := objectstore.KeysToDelete(keys)
	keyOf := func(k string) string { return k }
	if err := objectstore.DeleteInBatches(ctx, todo, s.opts.batchSize, s.opts.batchConcurrency, keyOf, s.deleteBatch, failed); err != nil {
		return nil, err
	}
	return objectstore.Failed(failed), nil
}

var deleteOptions = &container.BatchDeleteOptions{
	DeleteOptions: blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)},
}

// deleteBatch sends one Blob Batch request deleting keys and returns the keys that were not
// deleted, or the error of the request as a whole.
func (s *store) deleteBatch(ctx context.Context, keys []string) (map[string]error, error) {
	bb, err := s.client.NewBatchBuilder()
	if err != nil {
		return nil, fmt.Errorf("azure: container %q: building batch: %w", s.name, err)
	}
	for _, k := range keys {
		if err := bb.Delete(k, deleteOptions); err != nil {
			return nil, fmt.Errorf("azure: container %q: adding %q to a batch: %w", s.name, k, err)
		}
	}
	resp, err := s.submit(ctx, bb)
	if err != nil {
		return nil, s.errorf(fmt.Sprintf("batch delete of %d blobs", len(keys)), err)
	}

	failed := map[string]error{}
	answered := make([]bool, len(keys))
	containerMissing := 0
	for i, r := range resp.Responses {
		if r == nil {
			continue
		}
		// The sub-response's Content-ID is the index of its sub-request. (The SDK's BlobName
		// is derived from the URL path and is wrong for path-style URLs such as Azurite's.)
		idx := i
		if r.ContentID != nil {
			idx = *r.ContentID
		}
		if idx < 0 || idx >= len(keys) || answered[idx] {
			return nil, fmt.Errorf("azure: container %q: batch response has an unexpected sub-response (Content-ID %d of %d)", s.name, idx, len(keys))
		}
		answered[idx] = true
		switch {
		case r.Error == nil, bloberror.HasCode(r.Error, bloberror.BlobNotFound):
			// deleted, or never there
		case bloberror.HasCode(r.Error, bloberror.ContainerNotFound):
			containerMissing++
			failed[keys[idx]] = s.errorf(fmt.Sprintf("delete %q", keys[idx]), r.Error)
		default:
			failed[keys[idx]] = s.errorf(fmt.Sprintf("delete %q", keys[idx]), r.Error)
		}
	}
	for i, ok := range answered {
		if !ok {
			failed[keys[i]] = fmt.Errorf("azure: container %q: delete %q: no sub-response in the batch response", s.name, keys[i])
		}
	}
	if containerMissing > 0 {
		return nil, fmt.Errorf("azure: container %q: batch delete: %w", s.name, objectstore.ErrBucketNotFound)
	}
	return failed, nil
}

// submit is SubmitBatch, guarded: the SDK indexes its sub-requests by the Content-ID the
// service sends back and would panic on a malformed response.
func (s *store) submit(ctx context.Context, bb *container.BatchBuilder) (resp container.SubmitBatchResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed batch response: %v", p)
		}
	}()
	return s.client.SubmitBatch(ctx, bb, nil)
}

// CreateWithConfig is Create after checking config (the BackupBucket's providerConfig): a
// storage account key cannot reach Resource Manager, so a config that asks for what needs it
// (immutability) is an error, not silently ignored; so is an unknown cloud.
func (s *store) CreateWithConfig(ctx context.Context, config []byte) (string, error) {
	c, err := ParseBucketConfig(config)
	if err != nil {
		return "", err
	}
	if c.Immutability != nil {
		return "", fmt.Errorf("azure: %w: providerConfig.immutability: an immutability policy is set through Azure Resource Manager, which a storage account key cannot reach: give the BackupBucket service-principal or workload-identity credentials", objectstore.ErrInvalidConfig)
	}
	return "", s.Create(ctx)
}
