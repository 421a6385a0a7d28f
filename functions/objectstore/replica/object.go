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

// copy streams the source's object to the destination, hashing what it reads, and verifies
// what was written. An object that is not verified is removed again: the key had none before.
func (c copier) copy(ctx context.Context, key string, s objectstore.ObjectInfo) outcome {
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
		c.log.Debug("object copied", key, zap.Int64("size", o.size), zap.String("verifiedBy", o.method))
	case o.skipped:
		c.log.Debug("object at the destination already", key, zap.Int64("size", o.size), zap.String("verifiedBy", o.method))
	}
}
