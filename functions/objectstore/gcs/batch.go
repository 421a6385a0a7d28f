package gcs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// DeleteKeys deletes keys with batch requests of up to 100 deletes, up to the configured number
// at once, and reads every answer in them (objectstore.Batcher): a 404 counts as deleted once
// the bucket is known to be there, any other failure lands in failed. A server without the
// batch endpoint (it answers 404, 405 or 501 to it) gets single deletes from then on.
func (s *store) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	return s.deletes.DeleteKeys(ctx, keys)
}

// deleteOne deletes a key in a request of its own.
func (s *store) deleteOne(ctx context.Context, key string) (bool, error) {
	err := s.client.Bucket(s.name).Object(key).Delete(ctx)
	switch {
	case err == nil:
		return false, nil
	case isStatus(err, http.StatusNotFound), errors.Is(err, storage.ErrObjectNotExist):
		return true, nil
	}
	return false, s.errorf(fmt.Sprintf("delete %q", key), err)
}

// bucket reads the bucket's metadata: ErrBucketNotFound when it is missing.
func (s *store) bucket(ctx context.Context) error {
	if _, err := s.client.Bucket(s.name).Attrs(ctx); err != nil {
		return s.errorf("reading the bucket", err)
	}
	return nil
}

// sendBatch sends one batch request of deletes, one part per key (its Content-ID the key's
// index), and reads the answer of each.
func (s *store) sendBatch(ctx context.Context, keys []string) (failed map[string]error, notFound bool, err error) {
	if s.opts.noBatch {
		return nil, false, objectstore.ErrBatchUnsupported
	}
	op := fmt.Sprintf("delete %d objects", len(keys))
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for i, k := range keys {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", "application/http")
		h.Set("Content-ID", "<"+strconv.Itoa(i)+">")
		part, err := mw.CreatePart(h)
		if err != nil {
			return nil, false, err
		}
		fmt.Fprintf(part, "DELETE %sb/%s/o/%s HTTP/1.1\r\n\r\n", s.apiPath, url.PathEscape(s.name), url.PathEscape(k))
	}
	if err := mw.Close(); err != nil {
		return nil, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.batchURL, &body)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "multipart/mixed; boundary="+mw.Boundary())
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, false, s.errorf(op, err)
	}
	defer resp.Body.Close()
	if err := googleapi.CheckResponse(resp); err != nil {
		if isStatus(err, http.StatusNotFound) || isStatus(err, http.StatusMethodNotAllowed) || isStatus(err, http.StatusNotImplemented) {
			return nil, false, objectstore.ErrBatchUnsupported
		}
		return nil, false, s.errorf(op, err)
	}
	answered, err := readBatch(resp)
	if err != nil {
		return nil, false, fmt.Errorf("gcs: bucket %q: %s: reading the batch answer: %w", s.name, op, err)
	}
	failed = map[string]error{}
	for i, k := range keys {
		a, ok := answered[i]
		switch {
		case !ok:
			failed[k] = fmt.Errorf("gcs: bucket %q: delete %q: the batch answer has no part for it", s.name, k)
		case a.status == http.StatusOK, a.status == http.StatusNoContent:
		case a.status == http.StatusNotFound:
			notFound = true
		default:
			err := fmt.Errorf("gcs: bucket %q: delete %q: %w", s.name, k, responseError(a.status, a.reason, nil, nil))
			if objectstore.AffectsEveryKey(err) {
				return nil, false, err
			}
			failed[k] = err
		}
	}
	return failed, notFound, nil
}

// answer is one part of a batch answer: the inner response's status and error reason.
type answer struct {
	status int
	reason string
}

// readBatch reads a multipart/mixed batch answer into the answers by the index of their
// request (Content-ID "<response-i>").
func readBatch(resp *http.Response) (map[int]answer, error) {
	mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("content type %q is not multipart", resp.Header.Get("Content-Type"))
	}
	answers := map[int]answer{}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return answers, nil
		}
		if err != nil {
			return nil, err
		}
		id := strings.Trim(part.Header.Get("Content-ID"), "<>")
		i, err := strconv.Atoi(strings.TrimPrefix(id, "response-"))
		if err != nil {
			return nil, fmt.Errorf("part with Content-ID %q", id)
		}
		inner, err := http.ReadResponse(bufio.NewReader(part), nil)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		a := answer{status: inner.StatusCode}
		if a.status >= 300 && a.status != http.StatusNotFound {
			var e struct {
				Error struct {
					Errors []struct {
						Reason string `json:"reason"`
					} `json:"errors"`
				} `json:"error"`
			}
			data, _ := io.ReadAll(io.LimitReader(inner.Body, 64<<10))
			if json.Unmarshal(data, &e) == nil && len(e.Error.Errors) > 0 {
				a.reason = e.Error.Errors[0].Reason
			}
		}
		inner.Body.Close()
		answers[i] = a
	}
}
