package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Errors a caller acts on; Copy's error and every Failure's wrap one of them or a store's
// sentinel (objectstore.ErrBucketNotFound, objectstore.ErrUnauthorized, ...).
var (
	// ErrDiffers: the destination holds an object under a key of the source with other content
	// (another size or checksum). It was kept as it is; Report.Differing says which and how.
	ErrDiffers = errors.New("replica: destination object differs from the source")
	// ErrVerifyFailed: an object written to the destination does not read back as what was read
	// from the source (size or checksum), or the source read disagrees with the source's own
	// checksum. The written object is removed again (the failure says so, or why it could not
	// be): the key is left as it was before.
	ErrVerifyFailed = errors.New("replica: verification failed")
	// ErrIncomplete: some objects were not copied (Report.Failed says which and why, with the
	// store's sentinel); the rest were. A later run copies what is missing.
	ErrIncomplete = errors.New("replica: not every object was copied")
	// ErrSameStore: the source and the destination are one Store value.
	ErrSameStore = errors.New("replica: source and destination are the same store")
)

// Default settings.
const (
	DefaultConcurrency   = 4
	DefaultProgressEvery = 30 * time.Second
)

// Option adjusts a Copy.
type Option func(*options)

type options struct {
	concurrency   int
	log           *zap.Logger
	progressEvery time.Duration
}

// WithConcurrency sets how many objects are copied (or compared) at once; values below 1 mean
// 1. Default DefaultConcurrency. Each one holds at most the destination's upload buffers
// (objectstore.UploadPartSize × objectstore.UploadConcurrency) in memory.
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = max(n, 1) } }

// WithLogger sets the logger (default: none). Copy logs each object at debug, each differing
// object at warn, each failure at error, progress at info every WithProgressEvery, and a
// summary at info. It logs keys, sizes, checksums and the stores' errors (which never carry a
// credential), nothing else.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithProgressEvery sets how often a long copy logs its progress; 0 or less: never.
func WithProgressEvery(d time.Duration) Option { return func(o *options) { o.progressEvery = d } }

// Checksum is what is known of one object's content: its size and one digest.
type Checksum struct {
	Size int64
	// Algorithm is "md5" (the stores' own) or "sha256" (computed from the content); a
	// Difference carries digests of one algorithm on both sides.
	Algorithm string
	Sum       []byte
}

func (c Checksum) String() string {
	if c.Algorithm == "" {
		return fmt.Sprintf("%d bytes", c.Size)
	}
	return fmt.Sprintf("%d bytes, %s %x", c.Size, c.Algorithm, c.Sum)
}

// Difference is a key whose object at the destination differs from the source's: kept.
type Difference struct {
	Key                 string
	Source, Destination Checksum
}

func (d Difference) String() string {
	return fmt.Sprintf("%q: source %s, destination %s", d.Key, d.Source, d.Destination)
}

// Failure is a key that was not copied, and why.
type Failure struct {
	Key string
	Err error
}

// Report is what a Copy did. Objects are counted once each.
type Report struct {
	// Listed is how many objects the source holds under the prefix.
	Listed int
	// Copied objects were missing at the destination and are there now, verified; CopiedBytes
	// is their size.
	Copied      int
	CopiedBytes int64
	// ServerSide is how many of the copied objects the destination copied from the source
	// itself, the content never passing through Copy (objectstore.ServerSideCopier); the
	// rest were streamed.
	ServerSide int
	// Skipped objects were at the destination already with the same size and checksum.
	Skipped      int
	SkippedBytes int64
	// Vanished objects were listed but gone from the source before they were read (a garbage
	// collection of old snapshots); nothing was written for them.
	Vanished int
	// Differing objects are at the destination with other content; kept, not overwritten.
	// Sorted by key.
	Differing []Difference
	// Failed objects were not copied; the destination holds for each what it held before.
	// Sorted by key.
	Failed []Failure
	// VerifiedByMD5 and VerifiedBySHA256 count the objects copied or skipped by the checksum
	// that showed them equal: the stores' own MD5 on both ends, or SHA-256 of the content read
	// from both.
	VerifiedByMD5, VerifiedBySHA256 int
	// Newest is the newest object copied in this run (etcd-backup-restore's snapshots by last
	// revision then time; other keys by name); "" if none was.
	Newest string
	// Duration is how long the copy took.
	Duration time.Duration
}

// outcome is what became of one key.
type outcome struct {
	key    string
	size   int64
	copied bool
	// serverSide: copied by the destination itself.
	serverSide bool
	skipped    bool
	vanished   bool
	method     string // "md5" or "sha256": how it was shown equal
	differs    *Difference
	err        error
}

// Copy copies every object under prefix (a plain string prefix: end it with "/" to stay
// inside one entry) from src to dst under the same key; see the package documentation for what
// is copied, skipped, reported and verified. It never writes to or deletes from src, and never
// replaces or deletes an object at dst it did not write in this run.
//
// The error is nil when every object is at dst, verified; otherwise it wraps ErrDiffers,
// ErrIncomplete (with the first failure, whose message names its key), or both. A store-wide
// failure (a missing bucket, credentials rejected or not allowed (HTTP 403), ctx ending, a failed
// listing of the source)
// stops the copy early: the objects not yet tried are neither copied nor counted as failed,
// and the error wraps that failure. The Report is returned in every case.
func Copy(ctx context.Context, src, dst objectstore.Store, prefix string, opts ...Option) (*Report, error) {
	o := options{concurrency: DefaultConcurrency, log: zap.NewNop(), progressEvery: DefaultProgressEvery}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if same(src, dst) {
		return &Report{}, ErrSameStore
	}
	log := o.log.With(zap.String("prefix", prefix))
	start := time.Now()
	rep := &Report{}
	var mu sync.Mutex // guards rep

	g, gctx := errgroup.WithContext(ctx)
	keys := make(chan string)
	g.Go(func() error {
		defer close(keys)
		err := src.List(gctx, prefix, func(page []string) error {
			for _, k := range page {
				mu.Lock()
				rep.Listed++
				mu.Unlock()
				select {
				case keys <- k:
				case <-gctx.Done():
					return context.Cause(gctx)
				}
			}
			return nil
		})
		if err != nil && gctx.Err() == nil {
			return fmt.Errorf("replica: listing the source under %q: %w", prefix, err)
		}
		return nil
	})
	c := copier{src: src, dst: dst, log: log}
	if sc, ok := dst.(objectstore.ServerSideCopier); ok {
		c.server = &serverSide{to: sc}
	}
	for range o.concurrency {
		g.Go(func() error {
			for k := range keys {
				out := c.one(gctx, k)
				mu.Lock()
				rep.add(out)
				mu.Unlock()
				c.logOutcome(out)
				if out.err != nil && storeWide(out.err) {
					return out.err
				}
			}
			return nil
		})
	}
	stopProgress := progress(o.progressEvery, func() {
		mu.Lock()
		r := *rep
		mu.Unlock()
		log.Info("copy progress", zap.Int("listed", r.Listed), zap.Int("copied", r.Copied), zap.Int64("copiedBytes", r.CopiedBytes),
			zap.Int("skipped", r.Skipped), zap.Int("differing", len(r.Differing)), zap.Int("failed", len(r.Failed)),
			zap.Duration("elapsed", time.Since(start)))
	})
	stopped := g.Wait()
	stopProgress()
	if stopped == nil {
		// A cancellation the workers saw only as failed keys.
		stopped = ctx.Err()
	}
	rep.Duration = time.Since(start)
	// By key, whatever order the workers finished in: the error names the first.
	slices.SortFunc(rep.Failed, func(a, b Failure) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(rep.Differing, func(a, b Difference) int { return strings.Compare(a.Key, b.Key) })

	var errs []error
	switch n := len(rep.Failed); {
	case stopped != nil:
		done := rep.Copied + rep.Skipped + rep.Vanished + len(rep.Differing) + n
		errs = append(errs, fmt.Errorf("%w: the copy under %q stopped after %d objects (%d failed): %w", ErrIncomplete, prefix, done, n, stopped))
	case n > 0:
		errs = append(errs, fmt.Errorf("%w: %d objects failed (first: %w)", ErrIncomplete, n, rep.Failed[0].Err))
	}
	if n := len(rep.Differing); n > 0 {
		errs = append(errs, fmt.Errorf("%w: %d objects, kept (first %s)", ErrDiffers, n, rep.Differing[0]))
	}
	err := errors.Join(errs...)
	fields := []zap.Field{zap.Int("listed", rep.Listed), zap.Int("copied", rep.Copied), zap.Int64("copiedBytes", rep.CopiedBytes),
		zap.Int("serverSide", rep.ServerSide),
		zap.Int("skipped", rep.Skipped), zap.Int64("skippedBytes", rep.SkippedBytes), zap.Int("vanished", rep.Vanished),
		zap.Int("differing", len(rep.Differing)), zap.Int("failed", len(rep.Failed)),
		zap.Int("verifiedByMD5", rep.VerifiedByMD5), zap.Int("verifiedBySHA256", rep.VerifiedBySHA256),
		zap.String("newest", rep.Newest), zap.Duration("duration", rep.Duration)}
	if err != nil {
		log.Warn("copy finished with problems", append(fields, zap.Error(err))...)
	} else {
		log.Info("copy done", fields...)
	}
	return rep, err
}

func (r *Report) add(o outcome) {
	switch {
	case o.err != nil:
		r.Failed = append(r.Failed, Failure{Key: o.key, Err: o.err})
	case o.differs != nil:
		r.Differing = append(r.Differing, *o.differs)
	case o.vanished:
		r.Vanished++
	case o.copied:
		r.Copied++
		r.CopiedBytes += o.size
		if o.serverSide {
			r.ServerSide++
		}
		if r.Newest == "" || Newer(o.key, r.Newest) {
			r.Newest = o.key
		}
	case o.skipped:
		r.Skipped++
		r.SkippedBytes += o.size
	}
	switch o.method {
	case byMD5:
		r.VerifiedByMD5++
	case bySHA256:
		r.VerifiedBySHA256++
	}
}

// storeWide reports whether err concerns every key alike, so that trying the others is
// pointless: a missing bucket, rejected or insufficient credentials, the context ending. A
// 403 counts: an entry's prefix has one policy, and S3 answers a HEAD signed with a wrong key
// with a bare 403 that cannot tell the two apart.
func storeWide(err error) bool {
	for _, target := range []error{objectstore.ErrBucketNotFound, objectstore.ErrUnauthenticated, objectstore.ErrUnauthorized,
		objectstore.ErrNotReady, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// same reports whether a and b are one Store value; values of a type that cannot be compared
// are taken to be different.
func same(a, b objectstore.Store) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// progress calls fn every d until the returned function is called; d <= 0: never.
func progress(d time.Duration, fn func()) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fn()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
