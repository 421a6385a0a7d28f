package s3

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// store is one S3 bucket.
type store struct {
	name   string
	region string
	client *awss3.Client
	opts   options

	mu sync.Mutex
	// versioned is whether the bucket keeps versions, once read (nil before): a bucket's
	// versioning can be suspended but never turned off, so the answer only ever grows stale
	// by being enabled later, which a store opened afresh (the purge reuses one for 30 s)
	// sees.
	versioned *bool
}

var _ objectstore.Store = (*store)(nil)

// errStop ends a listing early.
var errStop = errors.New("stop listing")

func (s *store) errorf(op string, err error) error {
	return fmt.Errorf("s3: bucket %q: %s: %w", s.name, op, classify(err))
}

// Create creates the bucket in the store's region; one this account owns already is fine.
func (s *store) Create(ctx context.Context) error { return s.create(ctx, false) }

// create creates the bucket, with object lock enabled if objectLock (which S3 allows only
// at creation without versioning, and which turns versioning on).
func (s *store) create(ctx context.Context, objectLock bool) error {
	in := &awss3.CreateBucketInput{Bucket: aws.String(s.name)}
	if s.region != usEast1 {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(s.region)}
	}
	if objectLock {
		in.ObjectLockEnabledForBucket = aws.Bool(true)
	}
	_, err := s.client.CreateBucket(ctx, in)
	var (
		owned  *types.BucketAlreadyOwnedByYou
		exists *types.BucketAlreadyExists
	)
	switch {
	case err == nil, errors.As(err, &owned):
	case errors.As(err, &exists):
		// Bucket names are global on AWS: "exists" may be someone else's bucket. Some
		// S3-compatible services say so of one's own, too: it is ours if we may read it.
		if _, herr := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(s.name)}); herr != nil {
			return fmt.Errorf("s3: bucket %q: create: %w: another account owns a bucket of that name (S3 bucket names are global)", s.name, objectstore.ErrInvalidBucketName)
		}
	default:
		return s.errorf("create", err)
	}
	if s.opts.versioning {
		return s.enableVersioning(ctx)
	}
	return nil
}

// enableVersioning turns the bucket's versioning on (idempotent).
func (s *store) enableVersioning(ctx context.Context) error {
	_, err := s.client.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{
		Bucket:                  aws.String(s.name),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		return s.errorf("enable versioning", err)
	}
	s.setVersioned(true)
	return nil
}

// Delete empties the bucket — every object, version and delete marker — and deletes it; a
// missing bucket is fine. Objects that object lock protects are marked for deletion and make it
// an *objectstore.LockedError that says until when; everything else is deleted first, so a
// later attempt has only those left.
func (s *store) Delete(ctx context.Context) error {
	if err := objectstore.EmptyOrMark(ctx, s, s.name); err != nil {
		return fmt.Errorf("s3: bucket %q: delete: %w", s.name, err)
	}
	_, err := s.client.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(s.name)})
	if err == nil || errors.Is(classify(err), objectstore.ErrBucketNotFound) {
		return nil
	}
	// BucketNotEmpty: something was written meanwhile; the next attempt empties it again.
	return s.errorf("delete", err)
}

// isVersioned says whether the bucket keeps versions (versioning Enabled or Suspended),
// reading it once.
func (s *store) isVersioned(ctx context.Context) (bool, error) {
	s.mu.Lock()
	v := s.versioned
	s.mu.Unlock()
	if v != nil {
		return *v, nil
	}
	out, err := s.client.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(s.name)})
	if err != nil {
		return false, err
	}
	versioned := out.Status == types.BucketVersioningStatusEnabled || out.Status == types.BucketVersioningStatusSuspended
	s.setVersioned(versioned)
	return versioned, nil
}

func (s *store) setVersioned(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versioned = &v
}

// List lists the keys under prefix, page by page in the service's order, which is lexical
// (UTF-8 bytes). In a versioned bucket it lists every key that has a version or a delete
// marker left.
func (s *store) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	op := fmt.Sprintf("list %q", prefix)
	versioned, err := s.isVersioned(ctx)
	if err != nil {
		return s.errorf(op+": reading the bucket's versioning", err)
	}
	if versioned {
		last := ""
		return s.listVersions(ctx, op, prefix, func(versions []version) error {
			keys := make([]string, 0, len(versions))
			for _, v := range versions {
				if v.key != last {
					keys = append(keys, v.key)
					last = v.key
				}
			}
			return s.hand(keys, fn)
		})
	}
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(s.name), MaxKeys: aws.Int32(s.opts.listPageSize)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	pager := awss3.NewListObjectsV2Paginator(s.client, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return s.errorf(op, err)
		}
		keys := make([]string, 0, len(page.Contents))
		for _, o := range page.Contents {
			if o.Key != nil {
				keys = append(keys, *o.Key)
			}
		}
		if err := s.hand(keys, fn); err != nil {
			return err
		}
	}
	return nil
}

// hand passes keys on in pages of at most the page size, never an empty one.
func (s *store) hand(keys []string, fn func([]string) error) error {
	for len(keys) > 0 {
		n := min(len(keys), int(s.opts.listPageSize))
		if err := fn(keys[:n:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// version is one version or delete marker of a key.
type version struct{ key, id string }

// listVersions calls fn with the versions and delete markers under prefix, a list page at a
// time, sorted by key (the versions of one key may span pages).
func (s *store) listVersions(ctx context.Context, op, prefix string, fn func([]version) error) error {
	in := &awss3.ListObjectVersionsInput{Bucket: aws.String(s.name), MaxKeys: aws.Int32(s.opts.listPageSize)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	pager := awss3.NewListObjectVersionsPaginator(s.client, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return s.errorf(op, err)
		}
		versions := make([]version, 0, len(page.Versions)+len(page.DeleteMarkers))
		for _, v := range page.Versions {
			if v.Key != nil {
				versions = append(versions, version{key: *v.Key, id: aws.ToString(v.VersionId)})
			}
		}
		for _, m := range page.DeleteMarkers {
			if m.Key != nil {
				versions = append(versions, version{key: *m.Key, id: aws.ToString(m.VersionId)})
			}
		}
		// Versions and delete markers come in two lists, each sorted by key.
		slices.SortStableFunc(versions, func(a, b version) int { return strings.Compare(a.key, b.key) })
		if len(versions) == 0 {
			continue
		}
		if err := fn(versions); err != nil {
			return err
		}
	}
	return nil
}

// DeleteKeys deletes keys with DeleteObjects requests of at most 1000 objects, up to the
// configured number at once; in a versioned bucket every version and delete marker of each
// key, found with ListObjectVersions. Every per-key error in an answer is read: NoSuchKey and
// NoSuchVersion count as deleted, anything else lands in failed. A request that fails as a
// whole fails its keys, except when the failure concerns every key alike — a missing bucket,
// rejected credentials, a cancelled context — which fails the call.
func (s *store) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	todo, failed := objectstore.KeysToDelete(keys)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(todo) > 0 {
		objects, err := s.objectsOf(ctx, todo)
		if err != nil {
			return nil, err
		}
		keyOf := func(o types.ObjectIdentifier) string { return *o.Key }
		if err := objectstore.DeleteInBatches(ctx, objects, s.opts.deleteBatchSize, s.opts.deleteConcurrency, keyOf, s.deleteBatch, failed); err != nil {
			return nil, err
		}
	}
	return objectstore.Failed(failed), nil
}

// objectsOf returns what to delete for keys: the keys themselves in a bucket without
// versions, every version and delete marker of them in one with.
func (s *store) objectsOf(ctx context.Context, keys []string) ([]types.ObjectIdentifier, error) {
	versioned, err := s.isVersioned(ctx)
	if err != nil {
		return nil, s.errorf(fmt.Sprintf("delete %d objects: reading the bucket's versioning", len(keys)), err)
	}
	objects := make([]types.ObjectIdentifier, 0, len(keys))
	if !versioned {
		for _, k := range keys {
			objects = append(objects, types.ObjectIdentifier{Key: aws.String(k)})
		}
		return objects, nil
	}
	// One listing from the keys' common prefix up to the greatest key: a purge hands over a
	// listing page, whose keys are the first under its prefix.
	sorted := slices.Sorted(slices.Values(keys))
	lo, hi := sorted[0], sorted[len(sorted)-1]
	want := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		want[k] = struct{}{}
	}
	err = s.listVersions(ctx, fmt.Sprintf("list the versions of %d objects", len(keys)), commonPrefix(lo, hi), func(versions []version) error {
		for _, v := range versions {
			if v.key > hi {
				return errStop
			}
			if _, ok := want[v.key]; ok {
				objects = append(objects, types.ObjectIdentifier{Key: aws.String(v.key), VersionId: aws.String(v.id)})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return objects, nil
}

func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// deleteBatch sends one DeleteObjects request (quiet: the answer lists only failures) and
// returns the keys that were not deleted, or the error of the request as a whole.
func (s *store) deleteBatch(ctx context.Context, objects []types.ObjectIdentifier) (map[string]error, error) {
	out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
		Bucket: aws.String(s.name),
		Delete: &types.Delete{Objects: objects, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return nil, s.errorf(fmt.Sprintf("delete %d objects", len(objects)), err)
	}
	failed := map[string]error{}
	for _, e := range out.Errors {
		code := aws.ToString(e.Code)
		switch {
		case code == "NoSuchKey", code == "NoSuchVersion":
			// gone already
		case e.Key == nil:
			return nil, fmt.Errorf("s3: bucket %q: delete %d objects: the answer has an error without a key (%s)", s.name, len(objects), code)
		default:
			what := fmt.Sprintf("delete %q", *e.Key)
			if id := aws.ToString(e.VersionId); id != "" {
				what = fmt.Sprintf("delete %q version %s", *e.Key, id)
			}
			failed[*e.Key] = fmt.Errorf("s3: bucket %q: %s: %w", s.name, what, keyError(code, aws.ToString(e.Message)))
		}
	}
	return failed, nil
}
