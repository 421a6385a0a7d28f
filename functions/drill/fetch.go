package drill

import (
	"bytes"
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"

	"github.com/housekeeper-dev/housekeeper/functions/trailer"
)

// fetched is a snapshot object spooled to a local file, decompressed, its SHA-256 checked.
type fetched struct {
	// path is the file: the decompressed object, its trailing SHA-256 included.
	path string
	// size is the file's size; the data is the first size-sha256.Size bytes.
	size int64
	// stored is the object's size in the source.
	stored int64
}

// fetch copies the object of s into path: decompressed as its name says (etcd-backup-restore's
// compressor), through a hash of all but the last 32 bytes, which must be the SHA-256 of what
// comes before them — for a full snapshot etcd's own, for a delta the one etcd-backup-restore's
// snapshotter appends to the JSON of its events.
func fetch(ctx context.Context, src Source, s Snapshot, path string) (f fetched, err error) {
	rc, err := src.Open(ctx, s.Key)
	if err != nil {
		return f, s.fail(ErrSource, err, "opening it")
	}
	defer rc.Close()
	in := &recordingReader{ctx: ctx, r: rc}
	var data io.Reader = in
	switch s.Compression {
	case "":
	case ".gz":
		gz, err := gzip.NewReader(in)
		if err != nil {
			return f, classify(s, in, nil, err)
		}
		data = gz
	case ".zlib":
		z, err := zlib.NewReader(in)
		if err != nil {
			return f, classify(s, in, nil, err)
		}
		data = z
	case ".Z":
		// etcd-backup-restore's LzwCompressionPolicy: LSB order, literal width 8.
		data = lzw.NewReader(in, lzw.LSB, 8)
	default:
		return f, s.fail(ErrUnsupported, nil, "compression %q: etcd-backup-restore reads .gz, .zlib, .Z or none", s.Compression)
	}
	file, err := os.Create(path)
	if err != nil {
		return f, s.fail(ErrDrill, err, "creating its work file")
	}
	defer func() {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = s.fail(ErrDrill, cerr, "writing its work file")
		}
	}()
	h := trailer.New()
	out := &recordingWriter{w: file}
	size, err := io.Copy(io.MultiWriter(out, h), data)
	if err != nil {
		return f, classify(s, in, out, err)
	}
	f = fetched{path: path, size: size, stored: in.n}
	if s.Kind == KindFull {
		// etcd's snapshot db is whole pages; etcd-backup-restore and etcdutl both take
		// "size mod 512 is 32" as "the SHA-256 is there".
		if size%512 != sha256.Size {
			return f, s.fail(ErrTruncated, nil, "its snapshot db is %d bytes: not whole 512-byte sectors followed by the 32-byte SHA-256", size)
		}
	} else if size <= sha256.Size {
		return f, s.fail(ErrTruncated, nil, "it is %d bytes: no events before the 32-byte SHA-256", size)
	}
	if got, want := h.Sum(), h.Trailer(); !bytes.Equal(got, want) {
		return f, s.fail(ErrChecksumMismatch, nil, "the SHA-256 of its %d bytes is %x, the SHA-256 written after them is %x", size-sha256.Size, got, want)
	}
	return f, nil
}

// classify names what a failed copy means: the source failed, the work file failed, the
// object ends early, its compression's checksum fails, or it does not decode.
func classify(s Snapshot, in *recordingReader, out *recordingWriter, err error) *Error {
	switch {
	case in.err != nil && errors.Is(err, in.err) && !errors.Is(err, io.EOF):
		if ctxErr := in.ctx.Err(); ctxErr != nil {
			return s.fail(ErrDrill, ctxErr, "reading it")
		}
		return s.fail(ErrSource, err, "reading it after %d bytes", in.n)
	case out != nil && out.err != nil && errors.Is(err, out.err):
		return s.fail(ErrDrill, err, "writing its work file")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return s.fail(ErrTruncated, err, "its %s stream ends after %d bytes", s.Compression, in.n)
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, zlib.ErrChecksum):
		return s.fail(ErrChecksumMismatch, err, "its %s stream's checksum", s.Compression)
	}
	// flate.CorruptInputError, gzip.ErrHeader, zlib.ErrHeader, lzw's errors.
	return s.fail(ErrCorrupt, err, "decompressing its %s stream", s.Compression)
}

// recordingReader counts what it reads, remembers the source's error and honours ctx (a
// Source over files does not).
type recordingReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return 0, err
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

type recordingWriter struct {
	w   io.Writer
	err error
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}
