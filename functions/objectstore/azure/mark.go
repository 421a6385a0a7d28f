package azure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var _ objectstore.Locking = (*store)(nil)

// Mark tags the blobs blob-marked-for-deletion=true, keeping their other tags; the storage
// account's management policy rule (set with the immutability policy) deletes them once
// Azure lets it. until is the latest end of their retention: each blob's creation plus the
// period recorded on the container. A container without a recorded period (its policy was set
// outside housekeeper) gives a day from now, and note says so.
func (s *store) Mark(ctx context.Context, keys []string) (time.Time, string, error) {
	days, err := s.retentionDays(ctx)
	if err != nil {
		return time.Time{}, "", err
	}
	var until time.Time
	for _, key := range keys {
		b := s.client.NewBlobClient(key)
		props, err := b.GetProperties(ctx, nil)
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return until, "", s.errorf(fmt.Sprintf("read the properties of %q", key), err)
		}
		tags, err := s.tags(ctx, key)
		if err != nil {
			return until, "", err
		}
		if tags[MarkTag] != MarkValue {
			tags[MarkTag] = MarkValue
			if _, err := b.SetTags(ctx, tags, nil); err != nil {
				return until, "", s.errorf(fmt.Sprintf("mark %q", key), err)
			}
		}
		if days > 0 && props.CreationTime != nil {
			if end := props.CreationTime.Add(time.Duration(days) * 24 * time.Hour); end.After(until) {
				until = end
			}
		}
	}
	if days == 0 {
		return s.opts.now().Add(24 * time.Hour), "the container records no retention period (its policy was set outside housekeeper): the follow-up purge looks again in a day", nil
	}
	return until, "", nil
}

// Marked reports whether the blob carries the mark.
func (s *store) Marked(ctx context.Context, key string) (bool, error) {
	tags, err := s.tags(ctx, key)
	if errors.Is(err, errBlobNotFound) {
		return false, nil
	}
	return tags[MarkTag] == MarkValue, err
}

var errBlobNotFound = errors.New("blob not found")

func (s *store) tags(ctx context.Context, key string) (map[string]string, error) {
	resp, err := s.client.NewBlobClient(key).GetTags(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound) {
		return nil, errBlobNotFound
	}
	if err != nil {
		return nil, s.errorf(fmt.Sprintf("read the tags of %q", key), err)
	}
	tags := map[string]string{}
	for _, t := range resp.BlobTagSet {
		if t != nil && t.Key != nil {
			tags[*t.Key] = str(t.Value)
		}
	}
	return tags, nil
}
