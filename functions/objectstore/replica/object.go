package replica

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// How an object was shown equal to the source's.
const (
	byMD5    = "md5"
	bySHA256 = "sha256"
)

// removeTimeout bounds the removal of an object that failed verification, which runs even
// when the copy's context has ended: a cancelled copy must not leave a bad object behind.
const removeTimeout = time.Minute

type copier struct {
	src, dst objectstore.Store
	log      *zap.Logger
	// server is the destination's server-side copy; nil: every object streams.
	server *serverSide
}

// serverSide is a destination that copies server-side, until it refuses for the pair of
// stores: then, for the rest of the Copy, every object streams.
type serverSide struct {
	to objectstore.ServerSideCopier
	// mu holds the copies one at a time until one has gone through, so that a pair that
	// refuses costs one refused request, not one per worker.
	mu              sync.Mutex
	proven, refused atomic.Bool
}

// run calls copyFn unless the pair has refused; done is false when the object is to be
// streamed.
func (p *serverSide) run(copyFn func() (o outcome, done bool)) (outcome, bool) {
	if !p.proven.Load() {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	if p.refused.Load() {
		return outcome{}, false
	}
	o, done := copyFn()
	if o.serverSide {
		p.proven.Store(true)
	}
	return o, done
}

// one copies, skips or reports key.
func (c copier) one(ctx context.Context, key string) outcome {
	s, err := c.src.Stat(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return outcome{key: key, vanished: true}
	case err != nil:
		return fail(key, "reading the source object's properties", err)
	}
	d, err := c.dst.Stat(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return c.copy(ctx, key, s)
	case err != nil:
		return fail(key, "reading the destination object's properties", err)
	}
	return c.compare(ctx, key, s, d)
}

func fail(key, what string, err error) outcome {
	return outcome{key: key, err: fmt.Errorf("replica: %q: %s: %w", key, what, err)}
}

// compare tells whether the object at the destination is the source's: by the stores' MD5
// when both report one, by the SHA-256 of both objects read otherwise.
func (c copier) compare(ctx context.Context, key string, s, d objectstore.ObjectInfo) outcome {
	if s.MD5 != nil && d.MD5 != nil {
		if s.Size == d.Size && bytes.Equal(s.MD5, d.MD5) {
			return outcome{key: key, size: s.Size, skipped: true, method: byMD5}
		}
		return outcome{key: key, differs: &Difference{Key: key,
			Source:      Checksum{Size: s.Size, Algorithm: byMD5, Sum: s.MD5},
			Destination: Checksum{Size: d.Size, Algorithm: byMD5, Sum: d.MD5},
		}}
	}
	var (
		ssum Checksum
		serr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { ssum, serr = sha256Of(ctx, c.src, key) })
	dsum, derr := sha256Of(ctx, c.dst, key)
	wg.Wait()
	switch {
	case errors.Is(serr, objectstore.ErrObjectNotFound):
		return outcome{key: key, vanished: true}
	case serr != nil:
		return fail(key, "reading the source object", serr)
	case derr != nil:
		return fail(key, "reading the destination object", derr)
	case ssum.Size == dsum.Size && bytes.Equal(ssum.Sum, dsum.Sum):
		return outcome{key: key, size: ssum.Size, skipped: true, method: bySHA256}
	}
	return outcome{key: key, differs: &Difference{Key: key, Source: ssum, Destination: dsum}}
}

// copy copies the source's object to the destination, server-side where the destination can,
// and verifies what was written. An object that is not verified is removed again: the key had
// none before.
func (c copier) copy(ctx context.Context, key string, s objectstore.ObjectInfo) outcome {
	if c.server != nil {
		if o, done := c.server.run(func() (outcome, bool) { return c.copyServerSide(ctx, key, s) }); done {
			return o
		}
	}
	return c.stream(ctx, key, s)
}

// copyServerSide has the destination copy the object itself; done is false when it cannot, and
// the object is to be streamed.
func (c copier) copyServerSide(ctx context.Context, key string, s objectstore.ObjectInfo) (o outcome, done bool) {
	d, err := c.server.to.CopyFrom(ctx, c.src, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotServerSide):
		c.log.Debug("object not for a server-side copy, streamed", zap.String("key", key), zap.Int64("size", s.Size), zap.Error(err))
		return outcome{}, false
	case errors.Is(err, objectstore.ErrNotServerSide):
		if c.server.refused.CompareAndSwap(false, true) {
			c.log.Info("no server-side copy between these stores, streaming", zap.String("key", key), zap.Error(err))
		}
		return outcome{}, false
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return outcome{key: key, vanished: true}, true
	case errors.Is(err, objectstore.ErrObjectExists):
		// Written by another since the destination was read: compared, as any object there.
		d, err := c.dst.Stat(ctx, key)
		if err != nil {
			return fail(key, "reading the destination object's properties", err), true
		}
		return c.compare(ctx, key, s, d), true
	case err != nil:
		return fail(key, "copying the object server-side", err), true
	}
	method, err := c.verifyCopied(ctx, key, s, d)
	if err != nil {
		return c.discard(ctx, key, err), true
	}
	return outcome{key: key, size: d.Size, copied: true, serverSide: true, method: method}, true
}

// verifyCopied checks the object the destination copied at key (d) is the source's (s): by
// size, and by both stores' MD5 when both report one. Otherwise it reads the source, checked
// against its own MD5 if it has one, and verifies the copy against what was read, as a
// streamed one: by the destination's MD5, or by reading it back.
func (c copier) verifyCopied(ctx context.Context, key string, s, d objectstore.ObjectInfo) (string, error) {
	switch {
	case d.Size != s.Size:
		return "", fmt.Errorf("%w: the copy holds %d bytes, the source %d", ErrVerifyFailed, d.Size, s.Size)
	case s.MD5 != nil && d.MD5 != nil:
		if !bytes.Equal(s.MD5, d.MD5) {
			return "", fmt.Errorf("%w: the copy reports MD5 %x, the source %x", ErrVerifyFailed, d.MD5, s.MD5)
		}
		return byMD5, nil
	}
	rc, err := c.src.Open(ctx, key)
	if err != nil {
		return "", fmt.Errorf("reading the source object to verify the copy: %w", err)
	}
	defer rc.Close()
	read := &hashingReader{r: rc, sha: sha256.New(), md5: md5.New()}
	if _, err := io.Copy(io.Discard, read); err != nil {
		return "", fmt.Errorf("reading the source object to verify the copy: %w", err)
	}
	shaSum, md5Sum := read.sha.Sum(nil), read.md5.Sum(nil)
	if s.MD5 != nil && !bytes.Equal(md5Sum, s.MD5) {
		return "", fmt.Errorf("%w: the %d bytes read from the source have MD5 %x, the source reports %x", ErrVerifyFailed, read.n, md5Sum, s.MD5)
	}
	return c.verify(ctx, key, read.n, md5Sum, shaSum)
}

// stream streams the source's object to the destination, hashing what it reads, and verifies
// what was written.
func (c copier) stream(ctx context.Context, key string, s objectstore.ObjectInfo) outcome {
	rc, err := c.src.Open(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return outcome{key: key, vanished: true}
	case err != nil:
		return fail(key, "opening the source object", err)
	}
	read := &hashingReader{r: rc, sha: sha256.New(), md5: md5.New()}
	_, err = c.dst.Upload(ctx, key, read)
	_ = rc.Close() // read to its end, or abandoned with the upload
	if read.err != nil {
		if err == nil {
			// Every store fails an upload whose body fails; should one not, what it stored is
			// not the source's object.
			return c.discard(ctx, key, fmt.Errorf("reading the source object: %w (the store accepted the cut upload)", read.err))
		}
		return fail(key, "reading the source object", read.err)
	}
	if err != nil {
		return fail(key, "writing the destination object", err)
	}
	shaSum, md5Sum := read.sha.Sum(nil), read.md5.Sum(nil)
	if s.MD5 != nil && read.n == s.Size && !bytes.Equal(md5Sum, s.MD5) {
		return c.discard(ctx, key, fmt.Errorf("%w: the %d bytes read from the source have MD5 %x, the source reports %x", ErrVerifyFailed, read.n, md5Sum, s.MD5))
	}
	method, err := c.verify(ctx, key, read.n, md5Sum, shaSum)
	if err != nil {
		// Found wrong, or not read back: either way not verified, and not left to be taken
		// for a copy (a later run would keep a bad one as differing).
		return c.discard(ctx, key, err)
	}
	return outcome{key: key, size: read.n, copied: true, method: method}
}

// verify checks the object written at key is n bytes with the digests of what was read: by
// the destination's MD5 when it reports one, by reading it back otherwise. A mismatch is
// ErrVerifyFailed.
func (c copier) verify(ctx context.Context, key string, n int64, md5Sum, shaSum []byte) (string, error) {
	d, err := c.dst.Stat(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return "", fmt.Errorf("%w: the written object is not there", ErrVerifyFailed)
	case err != nil:
		return "", err
	case d.Size != n:
		return "", fmt.Errorf("%w: the destination holds %d bytes, %d were written", ErrVerifyFailed, d.Size, n)
	case d.MD5 != nil:
		if !bytes.Equal(d.MD5, md5Sum) {
			return "", fmt.Errorf("%w: the destination reports MD5 %x, what was written has %x", ErrVerifyFailed, d.MD5, md5Sum)
		}
		return byMD5, nil
	}
	back, err := sha256Of(ctx, c.dst, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return "", fmt.Errorf("%w: the written object is not there", ErrVerifyFailed)
	case err != nil:
		return "", fmt.Errorf("reading the written object back: %w", err)
	case back.Size != n || !bytes.Equal(back.Sum, shaSum):
		return "", fmt.Errorf("%w: the destination reads back as %s, what was written has %d bytes, sha256 %x", ErrVerifyFailed, back, n, shaSum)
	}
	return bySHA256, nil
}

// discard removes the object this copy wrote at key and could not verify, and returns the
// failure.
func (c copier) discard(ctx context.Context, key string, cause error) outcome {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	failed, err := c.dst.DeleteKeys(rctx, []string{key})
	if err == nil {
		err = failed[key]
	}
	if err != nil {
		return fail(key, "written but not verified, and not removed again ("+err.Error()+")", cause)
	}
	return fail(key, "written but not verified, removed again", cause)
}

// sha256Of reads the object at key whole, hashing it.
func sha256Of(ctx context.Context, s objectstore.Store, key string) (Checksum, error) {
	rc, err := s.Open(ctx, key)
	if err != nil {
		return Checksum{}, err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return Checksum{}, err
	}
	return Checksum{Size: n, Algorithm: bySHA256, Sum: h.Sum(nil)}, nil
}

// hashingReader hashes and counts what is read through it and keeps its first read error.
type hashingReader struct {
	r        io.Reader
	sha, md5 hash.Hash
	n        int64
	err      error
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		h.sha.Write(p[:n])
		h.md5.Write(p[:n])
		h.n += int64(n)
	}
	if err != nil && !errors.Is(err, io.EOF) && h.err == nil {
		h.err = err
	}
	return n, err
}

func (c copier) logOutcome(o outcome) {
	key := zap.String("key", o.key)
	switch {
	case o.err != nil:
		c.log.Error("object not copied", key, zap.Error(o.err))
	case o.differs != nil:
		c.log.Warn("object differs at the destination, kept", key,
			zap.Stringer("source", o.differs.Source), zap.Stringer("destination", o.differs.Destination))
	case o.vanished:
		c.log.Debug("object gone from the source before it was read", key)
	case o.copied:
		c.log.Debug("object copied", key, zap.Int64("size", o.size), zap.Bool("serverSide", o.serverSide), zap.String("verifiedBy", o.method))
	case o.skipped:
		c.log.Debug("object at the destination already", key, zap.Int64("size", o.size), zap.String("verifiedBy", o.method))
	}
}
