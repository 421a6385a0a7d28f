package objectstore

import (
	"context"
	"io"
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
