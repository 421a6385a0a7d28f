package objectstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// Data the body still holds is not read once the context has ended, and Close reaches the body.
func TestReadUntilDone(t *testing.T) {
	body := &closeRecorder{Reader: strings.NewReader("abcdef")}
	ctx, cancel := context.WithCancel(context.Background())
	r := objectstore.ReadUntilDone(ctx, body)
	b := make([]byte, 3)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "abc" {
		t.Fatalf("Read before cancel: %q, %v; want \"abc\"", b[:n], err)
	}
	cancel()
	if n, err := r.Read(b); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: %d bytes, %v; want none, context.Canceled", n, err)
	}
	if err := r.Close(); err != nil || !body.closed {
		t.Errorf("Close: %v, body closed %v; want nil, true", err, body.closed)
	}
}

// MapReadErrors maps a read's errors, but not the end of the data.
func TestMapReadErrors(t *testing.T) {
	errMapped := errors.New("mapped")
	mapErr := func(err error) error { return fmt.Errorf("%w: %w", errMapped, err) }
	r := objectstore.MapReadErrors(io.NopCloser(strings.NewReader("abc")), mapErr)
	if b, err := io.ReadAll(r); err != nil || string(b) != "abc" {
		t.Errorf("ReadAll: %q, %v; want \"abc\", nil", b, err)
	}
	r = objectstore.MapReadErrors(io.NopCloser(iotest.ErrReader(errCut)), mapErr)
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, errMapped) || !errors.Is(err, errCut) {
		t.Errorf("Read: %v, want it mapped", err)
	}
}
