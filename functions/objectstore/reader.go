package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// CountingReader counts the bytes read through it.
type CountingReader struct {
	R io.Reader
	N int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}

// ReadUntilDone returns rc whose reads fail with ctx's error once ctx has ended. Cancelling
// the request's context alone does not stop a download at once: what the connection had
// already received (a socket buffer holds MiBs) is still read, racing the transport's close.
func ReadUntilDone(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	return &doneReader{ctx: ctx, rc: rc}
}

type doneReader struct {
	ctx context.Context
	rc  io.ReadCloser
}

func (d *doneReader) Read(p []byte) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, err
	}
	return d.rc.Read(p)
}

func (d *doneReader) Close() error { return d.rc.Close() }

// MapReadErrors returns rc whose read errors other than io.EOF pass through mapErr: a provider's
// classification of what its SDK's own resuming reader fails with.
func MapReadErrors(rc io.ReadCloser, mapErr func(error) error) io.ReadCloser {
	return &mappedReader{ReadCloser: rc, mapErr: mapErr}
}

type mappedReader struct {
	io.ReadCloser
	mapErr func(error) error
}

func (m *mappedReader) Read(p []byte) (int, error) {
	n, err := m.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = m.mapErr(err)
	}
	return n, err
}

// MaxResumes is how many times in a row a read resumes without reading a byte in between before
// it gives up.
const MaxResumes = 3

// Part is a store's answer to a ranged read: the body and what the answer says of itself.
type Part struct {
	Body io.ReadCloser
	// ETag is the object's, as the answer names it; ContentRange the answer's Content-Range,
	// "bytes <first>-<last>/<size>".
	ETag, ContentRange string
}

// Reopen reads an object from offset to its end if its ETag is still etag: a GET with
// "Range: bytes=<offset>-" and "If-Match: <etag>". A store's 412 Precondition Failed is
// ErrObjectChanged.
type Reopen func(ctx context.Context, offset int64, etag string) (Part, error)

// ReadResuming returns a reader of the object whose GET answered body, size (its Content-Length)
// and etag. A read that breaks mid-way — a network error, the body ending before size — goes on
// where it stopped with reopen, up to MaxResumes times in a row without progress; a read of GiBs
// would otherwise fail whole on one broken connection. It resumes only from the same object
// (the ETag and range of the answer are checked too, in case a server ignores If-Match): one
// replaced in between is ErrObjectChanged. Neither the end of ctx nor a Close starts a resume;
// like ReadUntilDone, reads fail with ctx's error once ctx has ended. Without an ETag or a size
// there is nothing to resume safely from: that is ReadUntilDone.
func ReadResuming(ctx context.Context, body io.ReadCloser, size int64, etag string, reopen Reopen) io.ReadCloser {
	if etag == "" || size < 0 {
		return ReadUntilDone(ctx, body)
	}
	return &resumer{ctx: ctx, reopen: reopen, size: size, etag: etag, body: body}
}

type resumer struct {
	ctx    context.Context
	reopen Reopen
	size   int64
	etag   string

	mu     sync.Mutex // guards body and closed: a caller may Close from another goroutine
	body   io.ReadCloser
	closed bool

	off      int64 // bytes read
	failures int   // resumes in a row without a byte read
	cause    error // the read error that began them
	err      error // reading failed for good
}

func (r *resumer) Read(p []byte) (int, error) {
	for {
		if r.err != nil {
			return 0, r.err
		}
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		r.mu.Lock()
		body := r.body
		r.mu.Unlock()
		n, err := body.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.failures, r.cause = 0, nil
		}
		switch {
		case err == nil:
			return n, nil
		case r.off >= r.size:
			// The end, or an error there (an SDK's checksum at the end): nothing to resume.
			return n, err
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF
		}
		if cerr := r.ctx.Err(); cerr != nil {
			return n, cerr
		}
		if r.isClosed() {
			return n, err
		}
		r.err = r.resume(err)
		if n > 0 {
			return n, nil // r.err, if any, on the next Read
		}
	}
}

// resume reopens the object at r.off after err, until an answer is good or MaxResumes failed.
func (r *resumer) resume(err error) error {
	if r.cause == nil {
		r.cause = err
	}
	for {
		if r.failures++; r.failures > MaxResumes {
			return fmt.Errorf("reading after %d of %d bytes: %w; resuming failed %d times, last: %v", r.off, r.size, r.cause, MaxResumes, err)
		}
		part, rerr := r.reopen(r.ctx, r.off, r.etag)
		if rerr == nil {
			rerr = r.check(part)
		}
		switch {
		case r.ctx.Err() != nil:
			if rerr == nil {
				part.Body.Close()
			}
			return r.ctx.Err()
		case errors.Is(rerr, ErrObjectChanged), errors.Is(rerr, ErrObjectNotFound):
			return fmt.Errorf("reading after %d of %d bytes: %w; not resumed: %w", r.off, r.size, r.cause, rerr)
		case rerr != nil:
			err = rerr
			continue
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			part.Body.Close()
			return r.cause
		}
		r.body.Close()
		r.body = part.Body
		return nil
	}
}

// check makes sure part is the rest of the same object, closing it if not.
func (r *resumer) check(part Part) error {
	want := fmt.Sprintf("bytes %d-%d/%d", r.off, r.size-1, r.size)
	if part.ETag == r.etag && part.ContentRange == want {
		return nil
	}
	part.Body.Close()
	return fmt.Errorf("%w: resuming at byte %d got ETag %s, Content-Range %q; want %s, %q", ErrObjectChanged, r.off, part.ETag, part.ContentRange, r.etag, want)
}

func (r *resumer) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *resumer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.body.Close()
}
