package objectstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var errCut = errors.New("connection reset by peer")

// cutBody yields data, then err (nil: io.EOF at the end of data).
type cutBody struct {
	r      io.Reader
	err    error
	closed int
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *cutBody) Close() error { b.closed++; return nil }

// object is a fake store's object: its GETs break after cut[i] bytes (the i-th GET; none: not
// at all), and it may have been replaced by the time a ranged GET comes.
type object struct {
	data []byte
	etag string
	cuts []int // per GET, the first one included
	gets int

	offsets []int64    // of the ranged GETs
	bodies  []*cutBody // every body handed out
	reopen  func(offset int64) (objectstore.Part, error)
}

func (o *object) body(from int64) *cutBody {
	rest := o.data[from:]
	b := &cutBody{r: bytes.NewReader(rest)}
	if o.gets < len(o.cuts) && o.cuts[o.gets] < len(rest) {
		b.r, b.err = bytes.NewReader(rest[:o.cuts[o.gets]]), errCut
	}
	o.gets++
	o.bodies = append(o.bodies, b)
	return b
}

func (o *object) open(ctx context.Context) io.ReadCloser {
	return objectstore.ReadResuming(ctx, o.body(0), int64(len(o.data)), o.etag, func(_ context.Context, offset int64, etag string) (objectstore.Part, error) {
		o.offsets = append(o.offsets, offset)
		if etag != o.etag {
			return objectstore.Part{}, fmt.Errorf("If-Match %s, want %s", etag, o.etag)
		}
		if o.reopen != nil {
			return o.reopen(offset)
		}
		return objectstore.Part{Body: o.body(offset), ETag: o.etag, ContentRange: fmt.Sprintf("bytes %d-%d/%d", offset, len(o.data)-1, len(o.data))}, nil
	})
}

func newObject(size int, cuts ...int) *object {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	return &object{data: data, etag: `"v1"`, cuts: cuts}
}

// A read broken again and again, each time after some progress, comes back whole, resumed at
// the byte it stopped; more breaks than MaxResumes are fine while each one makes progress.
func TestReadResumingResumes(t *testing.T) {
	o := newObject(1000, 100, 300, 0, 200, 1, 1, 1, 1)
	r := o.open(context.Background())
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, o.data) {
		t.Fatalf("read %d bytes, %v; want the %d of the object", len(got), err, len(o.data))
	}
	if want := []int64{100, 400, 400, 600, 601, 602, 603, 604}; !slices.Equal(o.offsets, want) {
		t.Errorf("resumed at %v, want %v", o.offsets, want)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i, b := range o.bodies {
		if b.closed != 1 {
			t.Errorf("body %d closed %d times, want once", i, b.closed)
		}
	}
}

// A body that ends before its Content-Length says is a broken read too.
func TestReadResumingShortBody(t *testing.T) {
	o := newObject(1000)
	first := &cutBody{r: bytes.NewReader(o.data[:500])}
	r := objectstore.ReadResuming(context.Background(), first, 1000, o.etag, func(_ context.Context, offset int64, _ string) (objectstore.Part, error) {
		o.offsets = append(o.offsets, offset)
		return objectstore.Part{Body: o.body(offset), ETag: o.etag, ContentRange: fmt.Sprintf("bytes %d-999/1000", offset)}, nil
	})
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, o.data) {
		t.Fatalf("read %d bytes, %v; want the 1000 of the object", len(got), err)
	}
	if !slices.Equal(o.offsets, []int64{500}) {
		t.Errorf("resumed at %v, want [500]", o.offsets)
	}
}

// MaxResumes breaks in a row without a byte read in between (a body that breaks at once, a
// GET that fails) end the read with the first error, saying how far it got.
func TestReadResumingGivesUp(t *testing.T) {
	errGet := errors.New("dial tcp: connection refused")
	o := newObject(1000, 100, 0, 0, 0, 0)
	o.reopen = func(offset int64) (objectstore.Part, error) {
		if len(o.offsets) == 2 {
			return objectstore.Part{}, errGet
		}
		return objectstore.Part{Body: o.body(offset), ETag: o.etag, ContentRange: fmt.Sprintf("bytes %d-999/1000", offset)}, nil
	}
	r := o.open(context.Background())
	defer r.Close()
	got, err := io.ReadAll(r)
	if !errors.Is(err, errCut) || !strings.Contains(err.Error(), "after 100 of 1000 bytes") || !strings.Contains(err.Error(), "resuming failed 3 times") {
		t.Errorf("read error %v; want the first break, after 100 of 1000 bytes, resuming failed 3 times", err)
	}
	if !bytes.Equal(got, o.data[:100]) {
		t.Errorf("read %d bytes, want the object's first 100", len(got))
	}
	if len(o.offsets) != objectstore.MaxResumes {
		t.Errorf("%d ranged GETs, want %d", len(o.offsets), objectstore.MaxResumes)
	}
	if _, err2 := r.Read(make([]byte, 10)); err2 != err {
		t.Errorf("a Read after it gave up: %v, want the same error", err2)
	}
}

// An object replaced between the break and the resume fails the read: a 412 to If-Match, or an
// answer naming another ETag or another range (a server ignoring If-Match or Range). What was
// read is the old object's start, nothing of the new one.
func TestReadResumingObjectChanged(t *testing.T) {
	for name, answer := range map[string]func(o *object, offset int64) (objectstore.Part, error){
		"412": func(*object, int64) (objectstore.Part, error) {
			return objectstore.Part{}, fmt.Errorf("HTTP 412: %w", objectstore.ErrObjectChanged)
		},
		"other ETag": func(o *object, offset int64) (objectstore.Part, error) {
			return objectstore.Part{Body: o.body(offset), ETag: `"v2"`, ContentRange: fmt.Sprintf("bytes %d-999/1000", offset)}, nil
		},
		"other size": func(o *object, offset int64) (objectstore.Part, error) {
			return objectstore.Part{Body: o.body(offset), ETag: o.etag, ContentRange: fmt.Sprintf("bytes %d-1999/2000", offset)}, nil
		},
		"whole object": func(o *object, _ int64) (objectstore.Part, error) {
			return objectstore.Part{Body: o.body(0), ETag: o.etag}, nil
		},
		"deleted": func(*object, int64) (objectstore.Part, error) {
			return objectstore.Part{}, fmt.Errorf("HTTP 404: %w", objectstore.ErrObjectNotFound)
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := newObject(1000, 100)
			o.reopen = func(offset int64) (objectstore.Part, error) { return answer(o, offset) }
			r := o.open(context.Background())
			got, err := io.ReadAll(r)
			if err == nil || !errors.Is(err, errCut) || !strings.Contains(err.Error(), "not resumed") {
				t.Errorf("read error %v; want the break, not resumed", err)
			}
			if name != "deleted" && !errors.Is(err, objectstore.ErrObjectChanged) {
				t.Errorf("read error %v; want ErrObjectChanged", err)
			}
			if !bytes.Equal(got, o.data[:100]) {
				t.Errorf("read %d bytes, want the object's first 100", len(got))
			}
			if len(o.offsets) != 1 {
				t.Errorf("%d ranged GETs, want 1: a changed object is not retried", len(o.offsets))
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for i, b := range o.bodies {
				if b.closed != 1 {
					t.Errorf("body %d closed %d times, want once", i, b.closed)
				}
			}
		})
	}
}

// A read that fails because the context ended is not resumed: it fails with ctx's error.
func TestReadResumingContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	o := newObject(1000)
	first := &cancelBody{r: bytes.NewReader(o.data[:100]), cancel: cancel}
	r := objectstore.ReadResuming(ctx, first, 1000, o.etag, func(context.Context, int64, string) (objectstore.Part, error) {
		t.Error("resumed after the context ended")
		return objectstore.Part{}, errors.New("unreachable")
	})
	defer r.Close()
	n, err := io.Copy(io.Discard, r)
	if !errors.Is(err, context.Canceled) || n != 100 {
		t.Errorf("read %d bytes, %v; want 100, context.Canceled", n, err)
	}
}

// cancelBody cancels the context at its end and fails as a request's body then does.
type cancelBody struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.cancel()
		return n, errors.New("net/http: request canceled")
	}
	return n, err
}

func (b *cancelBody) Close() error { return nil }

// A Close by the caller, while a Read waits on the body, ends the reading; it is no break to
// resume from.
func TestReadResumingClosed(t *testing.T) {
	body := &blockingBody{closed: make(chan struct{})}
	r := objectstore.ReadResuming(context.Background(), body, 1000, `"v1"`, func(context.Context, int64, string) (objectstore.Part, error) {
		t.Error("resumed after Close")
		return objectstore.Part{}, errors.New("unreachable")
	})
	done := make(chan error)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, errBodyClosed) {
		t.Errorf("Read during Close: %v, want the body's error", err)
	}
}

var errBodyClosed = errors.New("read on closed response body")

type blockingBody struct{ closed chan struct{} }

func (b *blockingBody) Read([]byte) (int, error) { <-b.closed; return 0, errBodyClosed }
func (b *blockingBody) Close() error             { close(b.closed); return nil }

// An error at the object's end (an SDK's checksum) is the read's, not a break; without an ETag
// nothing is resumed.
func TestReadResumingNothingToResume(t *testing.T) {
	errChecksum := errors.New("checksum mismatch")
	reopen := func(context.Context, int64, string) (objectstore.Part, error) {
		t.Error("resumed")
		return objectstore.Part{}, errors.New("unreachable")
	}
	r := objectstore.ReadResuming(context.Background(), &cutBody{r: strings.NewReader("abc"), err: errChecksum}, 3, `"v1"`, reopen)
	if _, err := io.ReadAll(r); !errors.Is(err, errChecksum) {
		t.Errorf("an error at the end: %v, want it as it is", err)
	}
	r = objectstore.ReadResuming(context.Background(), &cutBody{r: strings.NewReader("abc"), err: errCut}, 10, "", reopen)
	if _, err := io.ReadAll(r); !errors.Is(err, errCut) {
		t.Errorf("a break without an ETag: %v, want it as it is", err)
	}
}
