package gcs

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// store is one GCS bucket.
type store struct {
	name      string
	endpoint  string // the JSON API's base URL: a server-side copy stays at one
	projectID string
	region    string
	client    *storage.Client
	http      *http.Client // the client's own, for the batch endpoint
	batchURL  string       // the batch endpoint
	apiPath   string       // the JSON API's path, "/storage/v1/": batch parts address it
	opts      options
	deletes   *objectstore.Batcher
}

var _ objectstore.Store = (*store)(nil)

func (s *store) errorf(op string, err error) error {
	return fmt.Errorf("gcs: bucket %q: %s: %w", s.name, op, classify(err))
}

// customTimeRule is the lifecycle rule upstream gives every bucket: an object whose custom
// time is a day old is deleted. provider-gcp marks an object the retention policy keeps from a
// purge with a custom time, so that this rule removes it once it may.
var customTimeRule = storage.LifecycleRule{
	Action:    storage.LifecycleAction{Type: storage.DeleteAction},
	Condition: storage.LifecycleCondition{DaysSinceCustomTime: 1},
}

// Create creates the bucket in the store's location, as upstream does: uniform bucket-level
// access, soft delete off (a purge must not leave a week of deleted backups behind, billed),
// and the custom-time lifecycle rule. A bucket this project has already is fine; its lifecycle
// gains the rule if it lacks it, keeping the rules it has.
func (s *store) Create(ctx context.Context) error {
	b := s.client.Bucket(s.name)
	attrs := &storage.BucketAttrs{
		Location:                 s.region,
		UniformBucketLevelAccess: storage.UniformBucketLevelAccess{Enabled: true},
		SoftDeletePolicy:         &storage.SoftDeletePolicy{RetentionDuration: 0},
		Lifecycle:                storage.Lifecycle{Rules: []storage.LifecycleRule{customTimeRule}},
	}
	err := b.Create(ctx, s.projectID, attrs)
	var ge *googleapi.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ge) && ge.Code == http.StatusConflict:
		// Bucket names are global: it is ours if we may read it.
	default:
		return s.errorf("create", err)
	}
	have, err := b.Attrs(ctx)
	if err != nil {
		if errors.Is(classify(err), objectstore.ErrUnauthorized) {
			return fmt.Errorf("gcs: bucket %q: create: %w: another project owns a bucket of that name (GCS bucket names are global)", s.name, objectstore.ErrInvalidBucketName)
		}
		return s.errorf("create: reading the existing bucket", err)
	}
	for _, r := range have.Lifecycle.Rules {
		if r.Action.Type == customTimeRule.Action.Type && r.Condition.DaysSinceCustomTime == customTimeRule.Condition.DaysSinceCustomTime {
			return nil
		}
	}
	rules := append(have.Lifecycle.Rules[:len(have.Lifecycle.Rules):len(have.Lifecycle.Rules)], customTimeRule)
	if _, err := b.If(storage.BucketConditions{MetagenerationMatch: have.MetaGeneration}).
		Update(ctx, storage.BucketAttrsToUpdate{Lifecycle: &storage.Lifecycle{Rules: rules}}); err != nil {
		return s.errorf("create: adding the custom-time lifecycle rule", err)
	}
	return nil
}

// Delete empties the bucket and deletes it; a missing bucket is fine. Upstream provider-gcp
// fails on a bucket with leftovers; this one deletes them first, a page at a time, so an
// interrupted call resumes with what is left.
func (s *store) Delete(ctx context.Context) error {
	locked, err := objectstore.Empty(ctx, s)
	if err != nil {
		return fmt.Errorf("gcs: bucket %q: delete: %w", s.name, err)
	}
	if len(locked) > 0 {
		return fmt.Errorf("gcs: bucket %q: delete: %w: the bucket's retention policy keeps %d objects, e.g. %q", s.name, objectstore.ErrObjectLocked, len(locked), locked[0])
	}
	err = s.client.Bucket(s.name).Delete(ctx)
	if err == nil || errors.Is(classify(err), objectstore.ErrBucketNotFound) || isStatus(err, http.StatusNotFound) {
		return nil
	}
	// 409: something was written meanwhile; the next attempt empties it again.
	return s.errorf("delete", err)
}

// List lists the names under prefix, a page of up to 1000 at a time in the service's order,
// which is lexical (UTF-8 bytes); only names are asked for.
func (s *store) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	op := fmt.Sprintf("list %q", prefix)
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return s.errorf(op, err)
	}
	it := s.client.Bucket(s.name).Objects(ctx, q)
	pager := iterator.NewPager(it, s.opts.listPageSize, "")
	for {
		var page []*storage.ObjectAttrs
		next, err := pager.NextPage(&page)
		if err != nil {
			if isStatus(err, http.StatusNotFound) {
				return fmt.Errorf("gcs: bucket %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
			}
			return s.errorf(op, err)
		}
		if len(page) > 0 {
			keys := make([]string, len(page))
			for i, o := range page {
				keys[i] = o.Name
			}
			if err := fn(keys); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
	}
}

// Upload streams r as a resumable upload in chunks of objectstore.UploadPartSize, one buffered
// at a time; the object appears when the last chunk is sent. On failure the context of the
// upload is cancelled, which abandons the session: no object appears.
func (s *store) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("gcs: bucket %q: %w", s.name, err)
	}
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.client.Bucket(s.name).Object(key).NewWriter(uctx)
	w.ChunkSize = objectstore.UploadPartSize
	counted := &objectstore.CountingReader{R: r}
	if _, err := io.Copy(w, counted); err != nil {
		cancel()
		_ = w.Close()
		return counted.N, s.writeError(fmt.Sprintf("upload %q", key), err)
	}
	if err := w.Close(); err != nil {
		return counted.N, s.writeError(fmt.Sprintf("upload %q", key), err)
	}
	return counted.N, nil
}

// Stat reads the object's metadata; MD5 is its md5Hash, which a composite object (one
// etcd-backup-restore composed from chunks) lacks.
func (s *store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %w", s.name, err)
	}
	attrs, err := s.client.Bucket(s.name).Object(key).Attrs(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) {
			return objectstore.ObjectInfo{}, fmt.Errorf("gcs: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return objectstore.ObjectInfo{}, s.errorf(fmt.Sprintf("stat %q", key), err)
	}
	info := objectstore.ObjectInfo{Key: key, Size: attrs.Size}
	if len(attrs.MD5) == md5.Size {
		info.MD5 = attrs.MD5
	}
	return info, nil
}

// Open reads the object with the library's Reader, which streams the body (and, reading the
// whole object, checks its CRC32C at the end). A 404 says the same of a missing bucket as of a
// missing object: the bucket is read to tell them apart.
func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("gcs: bucket %q: %w", s.name, err)
	}
	r, err := s.client.Bucket(s.name).Object(key).NewReader(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) || isStatus(err, http.StatusNotFound) {
			if err := s.bucket(ctx); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("gcs: bucket %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
		}
		return nil, s.errorf(fmt.Sprintf("open %q", key), err)
	}
	// The SDK's reader resumes a broken read itself, from the generation it began with.
	return objectstore.ReadUntilDone(ctx, objectstore.MapReadErrors(r, func(err error) error {
		if errors.Is(err, storage.ErrObjectNotExist) {
			return fmt.Errorf("gcs: bucket %q: %q: %w (its generation is gone)", s.name, key, objectstore.ErrObjectChanged)
		}
		return err
	})), nil
}

// writeError is the error of a write: a 404 to an object insert can only mean the bucket.
func (s *store) writeError(op string, err error) error {
	if isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("gcs: bucket %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
	}
	return s.errorf(op, err)
}

// isStatus reports whether err is a GCS answer with the HTTP status.
func isStatus(err error, status int) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == status
}
