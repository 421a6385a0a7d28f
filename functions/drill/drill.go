package drill

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options tune a drill; the zero value is usable.
type Options struct {
	// Layout is how the backups are named: etcd-backup-restore's (the zero value) or the
	// snapshot function's.
	Layout Layout
	// WorkDir is where the drill makes its temporary directory (the full snapshot's db, the
	// restored data directory, one delta at a time); "" is os.TempDir(). It needs room for
	// about twice the snapshot db.
	WorkDir string
	// Logger receives the etcd client's logs and the restorer's warnings and errors (etcd's
	// and etcdutl's); nil discards them.
	Logger *zap.Logger
	// QuotaBytes is the throwaway etcd's backend quota; 0 is etcd-backup-restore's 8 GiB.
	QuotaBytes int64
	// MaxRevisionBytes bounds the memory one revision's events take: the keys and values of a
	// revision, applied as one transaction, must fit; 0 is etcd-backup-restore's request limit of
	// 10 MiB, beyond which its restore fails too.
	MaxRevisionBytes int64
	// MemoryShare is the memory the drill may use, its share of a RestoreDrill's memoryBudget;
	// 0 is unchecked. A full snapshot whose keys need more (storeNeed) fails with ErrMemoryShare
	// before etcd starts on it, rather than running with its collector working all the time.
	// It is the Go soft memory limit of the restorer, the process the throwaway etcd runs in.
	MemoryShare int64
	// Check, if set, is called with a client of the restored etcd and its revision before it
	// is thrown away: a caller's own checks (certain keys exist, values decode). Its error is
	// returned as ErrCheck.
	Check func(ctx context.Context, c *clientv3.Client, revision int64) error
	// Etcdbrctl, if set, is etcd-backup-restore's command: once the drill's replay restored
	// the backups, it runs `etcdbrctl restore` on them from EtcdbrStore, in a process of its
	// own, into a second data directory in the work directory, and compares the two stores at
	// the replay's revision (Result.RealRestore). Unset, the drill says it did not run it.
	Etcdbrctl *Etcdbrctl
	// EtcdbrStore is where etcdbrctl reads the backups the drill reads from its Source.
	EtcdbrStore *EtcdbrStore
	// Live, if set, is the running etcd the backups are of: the drill compares the restored
	// store with it at the restored revision (Result.Live). Unset, Result.Live says so.
	Live LiveEtcd
}

// Result is what a drill restored and found.
type Result struct {
	// Prefix is the prefix the drill was run on.
	Prefix string `json:"prefix"`
	// Full is the key of the full snapshot restored; Deltas the keys of the deltas applied
	// after it, in order. They are set as soon as the chain is known, on failure too.
	Full   string   `json:"full,omitempty"`
	Deltas []string `json:"deltas,omitempty"`
	// NewestPoint is when the chain's newest snapshot was taken (from its name): the point in
	// time the backups restore to.
	NewestPoint time.Time `json:"newestPoint"`
	// FullRevision is the revision of the full snapshot's db, which may be ahead of the one
	// its name says.
	FullRevision int64 `json:"fullRevision"`
	// Revision is the restored store's revision. The deltas' events are applied one source
	// revision per transaction, so the store's revisions are the source's: Revision is the
	// source revision the backups restore to, the last delta's last revision (FullRevision
	// without deltas), and keys keep their source mod and create revisions.
	Revision int64 `json:"revision"`
	// Keys is how many keys the restored store holds at Revision.
	Keys int64 `json:"keys"`
	// KVSHA256 is the hex SHA-256 over every key and value at Revision in key order, each as
	// an 8-byte big-endian length and the bytes: independent of history and leases, equal to
	// the same digest of the source at Revision.
	KVSHA256 string `json:"kvSHA256,omitempty"`
	// HashKV is etcd's maintenance HashKV at Revision (history since CompactRevision
	// included); equal to the source's at that revision only where the source has not
	// compacted since the full snapshot and the deltas' keys carried no leases.
	HashKV          uint32 `json:"hashKV"`
	CompactRevision int64  `json:"compactRevision"`
	// DBSize and DBSizeInUse are the restored db's size and the part of it in use.
	DBSize      int64 `json:"dbSize"`
	DBSizeInUse int64 `json:"dbSizeInUse"`
	// OverlappingDeltas are the deltas of Deltas that start inside the delta before them,
	// written by two leaders around a leader election (Chain.Overlapping): the events they share
	// were checked to agree and applied once.
	OverlappingDeltas []string `json:"overlappingDeltas,omitempty"`
	// Events is how many delta events were applied; SkippedEvents how many the store held
	// already, from the full snapshot's db or an overlapping delta (checked to be in the store
	// at their revision, not applied).
	Events        int64 `json:"events"`
	SkippedEvents int64 `json:"skippedEvents"`
	// Leases is how many leases came with the full snapshot (kept alive while the drill ran).
	Leases int `json:"leases"`
	// ReadBytes is how many bytes the drill read from the source.
	ReadBytes int64 `json:"readBytes"`
	// Duration is how long the drill took.
	Duration time.Duration `json:"durationNanoseconds"`
	// RealRestore is what etcd-backup-restore's own restore made of the same backups, or why
	// it was not run; nil when the replay failed before it.
	RealRestore *RealRestore `json:"realRestore,omitempty"`
	// Live is how the restored store compares with the live etcd and how far it is behind
	// it, or why it was not compared; nil when the replay failed before it.
	Live *Live `json:"live,omitempty"`
}

const (
	defaultQuotaBytes = 8 << 30
	// defaultMaxRevisionBytes is etcd-backup-restore's request limit.
	defaultMaxRevisionBytes = 10 << 20
)

func (o Options) maxRevisionBytes() int64 {
	if o.MaxRevisionBytes <= 0 {
		return defaultMaxRevisionBytes
	}
	return o.MaxRevisionBytes
}

// Run drills the backups under prefix in src: see the package documentation. A failure is an
// *Error (errors.Is it against the sentinels); Result holds what was known by then.
func Run(ctx context.Context, src Source, prefix string, opts Options) (res Result, err error) {
	start := time.Now()
	res.Prefix = prefix
	defer func() { res.Duration = time.Since(start) }()
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	quota := opts.QuotaBytes
	if quota <= 0 {
		quota = defaultQuotaBytes
	}
	maxBytes := opts.maxRevisionBytes()

	var keys []string
	if err := src.List(ctx, prefix, func(page []string) error {
		keys = append(keys, page...)
		return nil
	}); err != nil {
		return res, &Error{Err: ErrSource, Detail: fmt.Sprintf("listing %q", prefix), Cause: err}
	}
	chain, err := opts.Layout.latest(prefix, keys)
	if chain.Full.Key != "" {
		res.Full = chain.Full.Key
		for _, d := range chain.Deltas {
			res.Deltas = append(res.Deltas, d.Key)
		}
		for _, d := range chain.Overlapping() {
			res.OverlappingDeltas = append(res.OverlappingDeltas, d.Key)
		}
		res.NewestPoint = chain.Last().CreatedOn
	}
	if err != nil {
		if e, ok := err.(*Error); ok && e.Err == ErrNoFullSnapshot {
			e.Detail = fmt.Sprintf("under %q: %s", prefix, e.Detail)
		}
		return res, err
	}

	work, err := os.MkdirTemp(opts.WorkDir, "drill-")
	if err != nil {
		return res, &Error{Err: ErrDrill, Detail: "creating the work directory", Cause: err}
	}
	defer os.RemoveAll(work)

	if err := replay(ctx, lg, src, chain, work, opts, quota, maxBytes, &res); err != nil {
		return res, err
	}
	err = realRestore(ctx, lg, opts, work, quota, uint(maxBytes)+requestOverhead, &res)
	if err == nil {
		err = res.Live.err()
	}
	return res, err
}

// replay restores chain with the drill's own code in work/data and fills res with what it
// restored: see Run.
func replay(ctx context.Context, lg *zap.Logger, src Source, chain Chain, work string, opts Options, quota, maxBytes int64, res *Result) (err error) {
	full, err := fetch(ctx, src, chain.Full, filepath.Join(work, "full.db"))
	res.ReadBytes += full.stored
	if err != nil {
		return err
	}
	// The snapshot's pages are read in a restorer, a process of its own: a malformed one
	// that panics bbolt ends it, not this one.
	proc, err := startRestorer(ctx, lg, restoreRequest{Snapshot: full.path, DataDir: filepath.Join(work, "data"), Quota: quota, MaxRequest: uint(maxBytes) + requestOverhead}, opts.MemoryShare)
	if err != nil {
		return chain.Full.restoreFailed(err)
	}
	defer proc.close()
	status := proc.status
	// etcd indexes every key in memory: the full snapshot's keys, known now, say what it needs.
	if need := opts.storeNeed(int64(status.TotalKey)); opts.MemoryShare > 0 && need > opts.MemoryShare {
		return chain.Full.fail(ErrMemoryShare, nil, "its %d keys need about %s, above the %s this drill may use (memoryBudget over concurrency): raise memoryBudget or lower concurrency",
			status.TotalKey, quantity(need), quantity(opts.MemoryShare))
	}

	etcd, err := proc.serve(lg, uint(maxBytes)+requestOverhead)
	if err != nil {
		return chain.Full.restoreFailed(err)
	}
	defer etcd.close()
	// A restorer that crashes while it serves crashed on the full snapshot's pages: a call to
	// it that failed, or one its end cut off, failed for that.
	defer func() {
		var e *Error
		if err == nil || errors.As(err, &e) && e.AboutTheBackup() {
			return
		}
		if f := proc.died(); f != nil && f.Crashed {
			err = chain.Full.fail(ErrCorrupt, f, "serving its restored db")
		}
	}()
	ctx = proc.ctx
	// Read before anything else can change the store: the deltas' overlap is judged by it.
	base, err := etcd.revision(ctx)
	if err != nil {
		return chain.Full.fail(ErrDrill, err, "reading the restored store's revision")
	}
	res.FullRevision = base
	if base < chain.Full.LastRevision {
		return chain.Full.fail(ErrRevisionMismatch, nil, "its db is at revision %d, its name says %d", base, chain.Full.LastRevision)
	}
	if status.Revision > base {
		return chain.Full.fail(ErrRevisionMismatch, nil, "its db holds revision %d, etcd serves it at %d", status.Revision, base)
	}
	if err := etcd.keepLeasesAlive(ctx); err != nil {
		return chain.Full.fail(ErrDrill, err, "keeping its leases alive")
	}
	res.Leases = etcd.leases
	if afterStart != nil {
		afterStart()
	}

	a := &applier{client: etcd.client, base: base, rev: base, maxBytes: maxBytes}
	for _, d := range chain.Deltas {
		f, err := fetch(ctx, src, d, filepath.Join(work, "delta"))
		res.ReadBytes += f.stored
		if err != nil {
			return err
		}
		err = a.apply(ctx, d, f)
		res.Events, res.SkippedEvents = a.applied, a.skipped
		if err != nil {
			return err
		}
	}
	res.Revision = a.rev
	last := chain.Last()

	// What the store serves now, not what the applier counted.
	if rev, err := etcd.revision(ctx); err != nil {
		return last.fail(ErrDrill, err, "reading the restored store's revision")
	} else if rev != res.Revision {
		return last.fail(ErrRevisionMismatch, nil, "the restored store is at revision %d after the deltas, not %d", rev, res.Revision)
	}
	if res.Keys, res.KVSHA256, err = digest(ctx, etcd.client, res.Revision); err != nil {
		return last.fail(ErrDrill, err, "reading the restored keys at revision %d", res.Revision)
	}
	hkv, err := etcd.client.HashKV(ctx, etcd.endpoint, res.Revision)
	if err != nil {
		return last.fail(ErrDrill, err, "hashing the restored store at revision %d", res.Revision)
	}
	res.HashKV, res.CompactRevision = hkv.Hash, hkv.CompactRevision
	st, err := etcd.client.Status(ctx, etcd.endpoint)
	if err != nil {
		return last.fail(ErrDrill, err, "reading the restored store's status")
	}
	res.DBSize, res.DBSizeInUse = st.DbSize, st.DbSizeInUse
	if opts.Check != nil {
		if err := opts.Check(ctx, etcd.client, res.Revision); err != nil {
			return last.fail(ErrCheck, err, "the store restored up to it")
		}
	}
	// Last: it compacts the store, which the checks above read whole.
	return compareLive(ctx, opts.Live, etcd, time.Now(), res)
}

// afterStart is a test hook: it runs once the throwaway etcd serves, before any delta.
var afterStart func()

func (t *throwaway) revision(ctx context.Context) (int64, error) {
	resp, err := t.client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// digest reads every key at rev, in pages, and returns how many there are and the hex SHA-256
// of their keys and values (see Result.KVSHA256).
func digest(ctx context.Context, c *clientv3.Client, rev int64) (int64, string, error) {
	h := sha256.New()
	var n int64
	var lenBuf [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(b)))
		h.Write(lenBuf[:])
		h.Write(b)
	}
	from := "\x00"
	for {
		resp, err := c.Get(ctx, from, clientv3.WithFromKey(), clientv3.WithRev(rev), clientv3.WithLimit(1000),
			clientv3.WithSerializable())
		if err != nil {
			return 0, "", err
		}
		for _, kv := range resp.Kvs {
			write(kv.Key)
			write(kv.Value)
			n++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return n, hex.EncodeToString(h.Sum(nil)), nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
