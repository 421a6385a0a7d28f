package swift

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// store is one Swift container.
type store struct {
	name   string
	region string
	auth   gophercloud.AuthOptions
	http   *http.Client
	opts   options

	deletes *objectstore.Batcher

	mu     sync.Mutex
	client *gophercloud.ServiceClient // once authenticated

	limitMu    sync.Mutex
	limit      int  // names a bulk delete holds (0: no bulk delete), once
	limitKnown bool // read from /info or learnt from a refusal
}

var _ objectstore.Store = (*store)(nil)

func (s *store) errorf(op string, err error) error {
	return fmt.Errorf("swift: container %q: %s: %w", s.name, op, classify(err))
}

// objectStorage authenticates once and returns the object-store endpoint of the region;
// gophercloud renews the token when it expires.
func (s *store) objectStorage(ctx context.Context) (*gophercloud.ServiceClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	provider, err := openstack.NewClient(s.auth.IdentityEndpoint)
	if err != nil {
		return nil, fmt.Errorf("swift: %w: %q: %v", objectstore.ErrInvalidCredentials, KeyAuthURL, err)
	}
	provider.HTTPClient = *s.http
	if err := openstack.Authenticate(ctx, provider, s.auth); err != nil {
		return nil, fmt.Errorf("swift: container %q: authenticating at %s: %w", s.name, s.auth.IdentityEndpoint, classify(err))
	}
	client, err := openstack.NewObjectStorageV1(provider, gophercloud.EndpointOpts{Region: s.region})
	if err != nil {
		return nil, fmt.Errorf("swift: container %q: %w: no object-store endpoint in region %q of Keystone's catalog", s.name, objectstore.ErrInvalidCredentials, s.region)
	}
	s.client = client
	return client, nil
}

// Create creates the container; one that exists is fine (Swift answers 202).
func (s *store) Create(ctx context.Context) error {
	c, err := s.objectStorage(ctx)
	if err != nil {
		return err
	}
	if _, err := containers.Create(ctx, c, s.name, nil).Extract(); err != nil {
		return s.errorf("create", err)
	}
	return nil
}

// Delete empties the container and deletes it; a missing container is fine.
func (s *store) Delete(ctx context.Context) error {
	locked, err := objectstore.Empty(ctx, s)
	if err != nil {
		return fmt.Errorf("swift: container %q: delete: %w", s.name, err)
	}
	if len(locked) > 0 {
		return fmt.Errorf("swift: container %q: delete: %w: %d objects, e.g. %q", s.name, objectstore.ErrObjectLocked, len(locked), locked[0])
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return err
	}
	_, err = containers.Delete(ctx, c, s.name).Extract()
	if err == nil || gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	// 409: something was written meanwhile; the next attempt empties it again.
	return s.errorf("delete", err)
}

// List lists the names under prefix, a page at a time in Swift's order, which is lexical
// (UTF-8 bytes).
func (s *store) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	op := fmt.Sprintf("list %q", prefix)
	c, err := s.objectStorage(ctx)
	if err != nil {
		return err
	}
	var handed error
	err = objects.List(c, s.name, objects.ListOpts{Prefix: prefix, Limit: s.opts.listPageSize}).EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		names, err := objects.ExtractNames(page)
		if err != nil {
			return false, err
		}
		if len(names) > 0 {
			if handed = fn(names); handed != nil {
				return false, handed
			}
		}
		return true, nil
	})
	switch {
	case handed != nil:
		return handed
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return fmt.Errorf("swift: container %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
	case err != nil:
		return s.errorf(op, err)
	}
	return nil
}

// DeleteKeys deletes keys with bulk deletes of as many names as the proxy takes (its /info, at
// most MaxBulkDelete), up to the configured number at once, and reads every per-name error in
// the answers (objectstore.Batcher): a name not found counts as deleted once the container is
// known to be there. A proxy without bulk delete gets one request per object from then on.
func (s *store) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	return s.deletes.DeleteKeys(ctx, keys)
}

// deleteOne deletes a key in a request of its own.
func (s *store) deleteOne(ctx context.Context, key string) (bool, error) {
	c, err := s.objectStorage(ctx)
	if err != nil {
		return false, err
	}
	_, err = objects.Delete(ctx, c, s.name, key, nil).Extract()
	switch {
	case err == nil:
		return false, nil
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return true, nil
	}
	return false, s.errorf(fmt.Sprintf("delete %q", key), err)
}

// container reads the container: ErrBucketNotFound when it is missing.
func (s *store) container(ctx context.Context) error {
	c, err := s.objectStorage(ctx)
	if err != nil {
		return err
	}
	if _, err := containers.Get(ctx, c, s.name, nil).Extract(); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return fmt.Errorf("swift: container %q: %w (HTTP 404)", s.name, objectstore.ErrBucketNotFound)
		}
		return s.errorf("reading the container", err)
	}
	return nil
}

// bulkDelete deletes keys with one bulk delete.
func (s *store) bulkDelete(ctx context.Context, keys []string) (failed map[string]error, notFound bool, err error) {
	if s.opts.noBulk {
		return nil, false, objectstore.ErrBatchUnsupported
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return nil, false, err
	}
	out, err := objects.BulkDelete(ctx, c, s.name, keys).Extract()
	// 204: a proxy without the bulk middleware took the POST for an account update (of nothing).
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) || gophercloud.ResponseCodeIs(err, http.StatusMethodNotAllowed) ||
		gophercloud.ResponseCodeIs(err, http.StatusNotImplemented) || gophercloud.ResponseCodeIs(err, http.StatusNoContent) {
		return nil, false, objectstore.ErrBatchUnsupported
	}
	op := fmt.Sprintf("delete %d objects", len(keys))
	if err != nil {
		return nil, false, s.errorf(op, err)
	}
	// More names than the proxy takes, which its /info did not say: it names its maximum, kept
	// for the next bulk deletes; these keys go again in bulk deletes that small.
	if n := refusedMax(out.ResponseStatus, out.ResponseBody); n > 0 && n < len(keys) {
		s.lowerBulkLimit(n)
		return s.bulkDeleteEach(ctx, keys, n)
	}
	notFound = out.NumberNotFound > 0
	failed = map[string]error{}
	named := map[string]bool{}
	prefix := s.name + "/"
	for _, e := range out.Errors {
		if len(e) != 2 {
			return nil, false, fmt.Errorf("swift: container %q: %s: an error in the answer is %d fields, want name and status", s.name, op, len(e))
		}
		name, status := e[0], e[1]
		// Swift names the object as /<container>/<object>, percent-encoded.
		if unescaped, err := url.PathUnescape(name); err == nil {
			name = unescaped
		}
		key := strings.TrimPrefix(strings.TrimPrefix(name, "/"), prefix)
		named[key] = true
		if strings.HasPrefix(status, "404") {
			notFound = true
			continue
		}
		failed[key] = fmt.Errorf("swift: container %q: delete %q: %w", s.name, key, statusError(status))
	}
	// A bulk delete whose request failed as a whole says so in its status, with no errors.
	if len(out.Errors) == 0 && out.ResponseStatus != "" && !strings.HasPrefix(out.ResponseStatus, "200") {
		return nil, false, fmt.Errorf("swift: container %q: %s: %w", s.name, op, statusError(out.ResponseStatus))
	}
	// One that met max_failed_deletes failures stopped there: the names it did not answer for
	// (it counts the deleted ones without naming them) may still be there.
	if out.NumberDeleted+out.NumberNotFound+len(out.Errors) < len(keys) {
		for _, k := range keys {
			if !named[k] {
				failed[k] = fmt.Errorf("swift: container %q: delete %q: %w", s.name, k, errBulkStopped)
			}
		}
	}
	return failed, notFound, nil
}

// errBulkStopped: a bulk delete ended before it answered for every name.
var errBulkStopped = errors.New("the bulk delete stopped before answering for it (the proxy's max_failed_deletes); not known to be deleted")

// bulkDeleteEach deletes keys with bulk deletes of n names, one after another.
func (s *store) bulkDeleteEach(ctx context.Context, keys []string, n int) (map[string]error, bool, error) {
	failed, notFound := map[string]error{}, false
	for chunk := range slices.Chunk(keys, n) {
		f, nf, err := s.bulkDelete(ctx, chunk)
		if err != nil {
			return nil, false, err
		}
		maps.Copy(failed, f)
		notFound = notFound || nf
	}
	return failed, notFound, nil
}

// Upload streams r as one object (a chunked PUT: nothing is buffered beyond the transport's
// copy buffer). Swift stores it once the request ends, whole; a read error aborts the request
// and leaves nothing. One object holds at most the proxy's max_file_size (5 GiB by default).
func (s *store) Upload(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("swift: container %q: %w", s.name, err)
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return 0, err
	}
	op := fmt.Sprintf("upload %q", key)
	counted := &objectstore.CountingReader{R: r}
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failing := &cancelOnError{r: counted, cancel: cancel}
	_, err = objects.Create(uctx, c, s.name, key, objects.CreateOpts{Content: failing}).Extract()
	switch {
	case failing.err != nil:
		return counted.N, s.errorf(op, failing.err)
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return counted.N, fmt.Errorf("swift: container %q: %s: %w (HTTP 404)", s.name, op, objectstore.ErrBucketNotFound)
	case err != nil:
		return counted.N, s.errorf(op, err)
	}
	return counted.N, nil
}

// cancelOnError cancels the upload's request when its body fails, so that the proxy sees a
// broken request and stores nothing (a body that just ended would be stored, cut short).
type cancelOnError struct {
	r      io.Reader
	cancel context.CancelFunc
	err    error
}

func (c *cancelOnError) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
		c.cancel()
	}
	return n, err
}

// Stat reads the object's metadata. An object's ETag is its content's MD5, unless it is a
// large-object manifest (static or dynamic, as etcd-backup-restore writes big snapshots), whose
// quoted ETag is a digest of its segments' ETags: MD5 is nil then.
func (s *store) Stat(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %w", s.name, err)
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	h, err := objects.Get(ctx, c, s.name, key, nil).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return objectstore.ObjectInfo{}, fmt.Errorf("swift: container %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
	}
	if err != nil {
		return objectstore.ObjectInfo{}, s.errorf(fmt.Sprintf("stat %q", key), err)
	}
	info := objectstore.ObjectInfo{Key: key, Size: h.ContentLength}
	if !h.StaticLargeObject && h.ObjectManifest == "" && !strings.HasPrefix(h.ETag, `"`) {
		info.MD5 = objectstore.HexMD5(h.ETag)
	}
	return info, nil
}

// Open downloads the object and hands on the response's body unread. A read that breaks mid-way
// resumes where it stopped, a few times, with a download of the rest of the same object (Range,
// If-Match its ETag): a snapshot of GiBs would otherwise fail whole on one broken connection.
// Swift answers 404 alike for a missing container and a missing object: the container is read to
// tell them apart.
func (s *store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("swift: container %q: %w", s.name, err)
	}
	c, err := s.objectStorage(ctx)
	if err != nil {
		return nil, err
	}
	res := objects.Download(ctx, c, s.name, key, nil)
	if res.Err != nil {
		return nil, s.downloadError(ctx, key, res)
	}
	size, err := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		size = -1 // chunked: nothing to resume against
	}
	reopen := func(ctx context.Context, offset int64, etag string) (objectstore.Part, error) {
		res := objects.Download(ctx, c, s.name, key, objects.DownloadOpts{Range: fmt.Sprintf("bytes=%d-", offset), IfMatch: etag})
		if res.Err != nil {
			return objectstore.Part{}, s.downloadError(ctx, key, res)
		}
		return objectstore.Part{Body: res.Body, ETag: res.Header.Get("Etag"), ContentRange: res.Header.Get("Content-Range")}, nil
	}
	return objectstore.ReadResuming(ctx, res.Body, size, res.Header.Get("Etag"), reopen), nil
}

// downloadError is the error of a failed download of key; 412 answers a resume's If-Match.
func (s *store) downloadError(ctx context.Context, key string, res objects.DownloadResult) error {
	if res.Body != nil {
		res.Body.Close()
	}
	switch {
	case gophercloud.ResponseCodeIs(res.Err, http.StatusNotFound):
		if err := s.container(ctx); err != nil {
			return err
		}
		return fmt.Errorf("swift: container %q: %q: %w", s.name, key, objectstore.ErrObjectNotFound)
	case gophercloud.ResponseCodeIs(res.Err, http.StatusPreconditionFailed):
		return fmt.Errorf("swift: container %q: %q: %w (HTTP 412)", s.name, key, objectstore.ErrObjectChanged)
	}
	return s.errorf(fmt.Sprintf("open %q", key), res.Err)
}
