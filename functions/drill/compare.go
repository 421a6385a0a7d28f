package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// realRestore runs etcd-backup-restore's restore of the backups res was replayed from, where
// opts configure it, and compares its store with the replay's in work/data at res.Revision.
// For backups it does not read res.RealRestore is NotApplicable; not configured, NotRun: both
// say why.
func realRestore(ctx context.Context, lg *zap.Logger, opts Options, work string, quota int64, maxRequest uint, res *Result) error {
	switch {
	case opts.Layout != LayoutEtcdBackupRestore:
		res.RealRestore = &RealRestore{Outcome: RealRestoreNotApplicable, NotRun: "the snapshot function's backups are not in etcd-backup-restore's layout"}
		return nil
	case opts.Etcdbrctl == nil:
		res.RealRestore = &RealRestore{Outcome: RealRestoreNotRun, NotRun: "no etcdbrctl configured"}
		return nil
	case opts.EtcdbrStore == nil:
		res.RealRestore = &RealRestore{Outcome: RealRestoreNotRun, NotRun: "no store configuration for etcdbrctl"}
		return nil
	}
	rr := &RealRestore{Tool: opts.Etcdbrctl.Tool()}
	res.RealRestore = rr
	err := compareRealRestore(ctx, lg, opts, work, quota, maxRequest, res, rr)
	switch {
	case err == nil:
		rr.Outcome = RealRestoreAgrees
	case errors.Is(err, ErrRealRestoreDiffers):
		rr.Outcome = RealRestoreDiffers
	case errors.Is(err, ErrRealRestoreFailed):
		rr.Outcome = RealRestoreFails
		if n := len(res.OverlappingDeltas); n > 0 {
			var e *Error
			if errors.As(err, &e) {
				// Its failure is etcd-backup-restore#1043's where deltas overlap: say so first,
				// the tail of its output after.
				e.Detail = fmt.Sprintf("overlapping deltas, written by two leaders: %d (first %s), which %s does not restore (etcd-backup-restore#1043); %s",
					n, path.Base(res.OverlappingDeltas[0]), rr.Tool, e.Detail)
			}
		}
	default:
		rr.Outcome = RealRestoreNotCompared
	}
	return err
}

func compareRealRestore(ctx context.Context, lg *zap.Logger, opts Options, work string, quota int64, maxRequest uint, res *Result, rr *RealRestore) error {
	start := time.Now()
	theirDir := filepath.Join(work, "etcdbr-data")
	err := runEtcdbrctl(ctx, opts.Etcdbrctl, opts.EtcdbrStore, work, theirDir, quota)
	rr.Duration = time.Since(start)
	if err != nil {
		return err
	}
	// Its revision as it left the db, before an etcd on it revokes a lease. Its pages too are
	// read in a restorer of their own.
	proc, err := startRestorer(ctx, lg, restoreRequest{DataDir: theirDir, Quota: quota, MaxRequest: maxRequest}, opts.MemoryShare)
	if err != nil {
		return theirFailure(rr.Tool, err, "'s restored db does not open")
	}
	defer proc.close()
	rr.Revision = proc.status.Revision
	if rr.Revision < res.Revision {
		return &Error{Err: ErrRealRestoreDiffers, Detail: fmt.Sprintf("%s restores revision %s, the backups hold revisions up to %s",
			rr.Tool, thousands(rr.Revision), thousands(res.Revision))}
	}
	theirs, err := proc.serve(lg, maxRequest)
	if err != nil {
		return theirFailure(rr.Tool, err, "'s restored data directory does not serve")
	}
	defer theirs.close()
	ctx = proc.ctx
	if rr.Keys, rr.KVSHA256, err = digest(ctx, theirs.client, res.Revision); err != nil {
		return &Error{Err: ErrDrill, Detail: fmt.Sprintf("reading %s's restored keys at revision %d", rr.Tool, res.Revision), Cause: err}
	}
	hkv, err := theirs.client.HashKV(ctx, theirs.endpoint, res.Revision)
	if err != nil {
		return &Error{Err: ErrDrill, Detail: fmt.Sprintf("hashing %s's restored store at revision %d", rr.Tool, res.Revision), Cause: err}
	}
	rr.HashKV = hkv.Hash
	// HashKV covers the history since the compaction: comparable where both compacted alike.
	sameHistory := hkv.CompactRevision != res.CompactRevision || hkv.Hash == res.HashKV
	if rr.Keys == res.Keys && rr.KVSHA256 == res.KVSHA256 && sameHistory {
		rr.Agrees = true
		return nil
	}
	// Which keys differ: the replay's store again, beside etcd-backup-restore's.
	ours, err := serveAgain(ctx, lg, filepath.Join(work, "data"), quota, maxRequest, opts.MemoryShare)
	if err != nil {
		return &Error{Err: ErrDrill, Detail: "starting etcd on the drill's restored data directory again", Cause: err}
	}
	defer ours.close()
	d, err := diffStores(ctx, ours.client, theirs.client, res.Revision, maxDiffKeys, false)
	if err != nil {
		return &Error{Err: ErrDrill, Detail: fmt.Sprintf("comparing %s's restored keys with the drill's at revision %d", rr.Tool, res.Revision), Cause: err}
	}
	rr.Missing, rr.Extra, rr.Changed = d.missing, d.extra, d.changed
	return &Error{Err: ErrRealRestoreDiffers, Detail: d.describe(rr.Tool, res.Revision, res.HashKV, rr.HashKV)}
}

// theirFailure is the drill's error for a restorer's failure on etcd-backup-restore's restored
// data directory: one that crashed on it or found it malformed, their restore failed;
// otherwise the drill could not say (ErrDrill).
func theirFailure(tool string, err error, what string) error {
	var f *restorerFailure
	if errors.As(err, &f) && !f.NotTheData && (f.Crashed || f.Step == stepStatus) {
		return &Error{Err: ErrRealRestoreFailed, Detail: tool + what, Cause: err}
	}
	return &Error{Err: ErrDrill, Detail: fmt.Sprintf("reading %s's restored data directory", tool), Cause: err}
}

// serveAgain serves a data directory restored before, in a restorer of its own.
func serveAgain(ctx context.Context, lg *zap.Logger, dataDir string, quota int64, maxRequest uint, memoryLimit int64) (*throwaway, error) {
	proc, err := startRestorer(ctx, lg, restoreRequest{DataDir: dataDir, Quota: quota, MaxRequest: maxRequest}, memoryLimit)
	if err != nil {
		return nil, err
	}
	t, err := proc.serve(lg, maxRequest)
	if err != nil {
		_ = proc.close()
		return nil, err
	}
	return t, nil
}

// storeDiff is how one store's keys and values at a revision differ from another's.
type storeDiff struct {
	// nMissing, nExtra and nChanged count all of them; missing, extra and changed are the
	// first keys of each, at most limit of all three together.
	nMissing, nExtra, nChanged int
	missing, extra, changed    []string
}

func (d *storeDiff) describe(tool string, rev int64, ourHash, theirHash uint32) string {
	parts := d.parts("without %s %s that the backups hold", "with %s %s that the backups do not hold", "with other values for %s %s")
	if len(parts) == 0 {
		return fmt.Sprintf("%s restores revision %s with the same keys and values but another history (HashKV %d, the drill's %d)", tool, thousands(rev), theirHash, ourHash)
	}
	return fmt.Sprintf("%s restores revision %s %s", tool, thousands(rev), strings.Join(parts, "; "))
}

// parts says each kind of difference there is with its format (a count, then "key" or
// "keys"), followed by the keys named.
func (d *storeDiff) parts(missing, extra, changed string) []string {
	var parts []string
	list := func(n int, keys []string, what string) {
		if n == 0 {
			return
		}
		noun := "keys"
		if n == 1 {
			noun = "key"
		}
		s := fmt.Sprintf(what, thousands(int64(n)), noun)
		if len(keys) > 0 {
			s += ": " + strings.Join(keys, ", ")
			if len(keys) < n {
				s += ", …"
			}
		}
		parts = append(parts, s)
	}
	list(d.nMissing, d.missing, missing)
	list(d.nExtra, d.extra, extra)
	list(d.nChanged, d.changed, changed)
	return parts
}

// diffStores walks both stores' keys at rev in key order and finds where theirs differs from
// ours, naming at most limit keys. Values are compared, never kept; with modRevisions, a key
// whose mod revision differs is changed too.
func diffStores(ctx context.Context, ours, theirs *clientv3.Client, rev int64, limit int, modRevisions bool) (storeDiff, error) {
	var d storeDiff
	a, b := &pager{c: ours, rev: rev}, &pager{c: theirs, rev: rev}
	named := 0
	name := func(keys *[]string, k []byte) {
		if named < limit {
			*keys = append(*keys, keyText(k))
			named++
		}
	}
	for {
		x, err := a.peek(ctx)
		if err != nil {
			return d, err
		}
		y, err := b.peek(ctx)
		if err != nil {
			return d, err
		}
		switch {
		case x == nil && y == nil:
			return d, nil
		case y == nil || (x != nil && bytes.Compare(x.Key, y.Key) < 0):
			d.nMissing++
			name(&d.missing, x.Key)
			a.next()
		case x == nil || bytes.Compare(y.Key, x.Key) < 0:
			d.nExtra++
			name(&d.extra, y.Key)
			b.next()
		default:
			if !bytes.Equal(x.Value, y.Value) || (modRevisions && x.ModRevision != y.ModRevision) {
				d.nChanged++
				name(&d.changed, x.Key)
			}
			a.next()
			b.next()
		}
	}
}

// pager reads a store's keys at rev in key order, a page at a time.
type pager struct {
	c    *clientv3.Client
	rev  int64
	from string
	page []*mvccpb.KeyValue
	more bool
	read bool // a page was read
}

func (p *pager) peek(ctx context.Context) (*mvccpb.KeyValue, error) {
	if len(p.page) == 0 && (!p.read || p.more) {
		from := "\x00"
		if p.read {
			from = p.from
		}
		resp, err := p.c.Get(ctx, from, clientv3.WithFromKey(), clientv3.WithRev(p.rev), clientv3.WithLimit(1000), clientv3.WithSerializable())
		if err != nil {
			return nil, err
		}
		p.read, p.page, p.more = true, resp.Kvs, resp.More && len(resp.Kvs) > 0
		if n := len(resp.Kvs); n > 0 {
			p.from = string(resp.Kvs[n-1].Key) + "\x00"
		}
	}
	if len(p.page) == 0 {
		return nil, nil
	}
	return p.page[0], nil
}

func (p *pager) next() { p.page = p.page[1:] }

// keyText is a key as a result names it: as it is when it is printable UTF-8, else quoted;
// cut at 200 bytes.
func keyText(k []byte) string {
	s := string(k)
	printable := utf8.ValidString(s)
	for _, r := range s {
		if !strconv.IsPrint(r) {
			printable = false
			break
		}
	}
	if !printable {
		s = strconv.Quote(s)
	}
	return kube.Truncate(s, 200)
}
