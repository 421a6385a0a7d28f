package drill

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdconn"
)

// LiveEtcd is the running etcd whose backups a drill restores. The drill only reads it: its
// status, HashKV and, where the hashes cannot decide, its keys at one revision.
type LiveEtcd interface {
	// Connect returns a client of it and the endpoint that answered; the caller closes the
	// client.
	Connect(ctx context.Context) (*clientv3.Client, string, error)
}

// LiveEtcdFunc is a LiveEtcd as a function.
type LiveEtcdFunc func(ctx context.Context) (*clientv3.Client, string, error)

// Connect calls f.
func (f LiveEtcdFunc) Connect(ctx context.Context) (*clientv3.Client, string, error) { return f(ctx) }

// LiveEndpoints is the etcd at endpoints, spoken to with tlsConfig (nil: plain text), connected
// to as the snapshot function connects to an EtcdBackupConfig's (etcdconn.Dial).
func LiveEndpoints(endpoints []string, tlsConfig *tls.Config) LiveEtcd {
	return LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) {
		return etcdconn.Dial(ctx, endpoints, tlsConfig, zap.NewNop())
	})
}

// liveTimeout bounds the live etcd's status; its HashKV and keys, which take as long as its db
// is large, only the drill's timeout bounds.
const liveTimeout = 30 * time.Second

// Live is how the restored store compares with the live etcd at the restored revision, and
// how far the backups are behind it.
type Live struct {
	// Outcome is one of backupv1alpha1's Live outcomes (LiveMatches, ...).
	Outcome string `json:"outcome"`
	// Endpoint is the endpoint asked.
	Endpoint string `json:"endpoint,omitempty"`
	// Revision is the live etcd's revision when the drill asked it; CompactRevision the
	// revision it has compacted up to.
	Revision        int64 `json:"revision,omitempty"`
	CompactRevision int64 `json:"compactRevision,omitempty"`
	// HashKV is the live etcd's HashKV at the restored revision; OurHashKV the restored
	// store's, compacted to CompactRevision first.
	HashKV    uint32 `json:"hashKV,omitempty"`
	OurHashKV uint32 `json:"ourHashKV,omitempty"`
	// ByKeys says the stores were compared key by key (key, value and mod revision of every
	// key at the restored revision) because their HashKVs could not decide.
	ByKeys bool `json:"byKeys,omitempty"`
	// BehindRevisions is Revision less the restored revision: the revisions the backups do not
	// hold yet. BehindSeconds is the time from the newest restorable point to the comparison.
	BehindRevisions int64 `json:"behindRevisions,omitempty"`
	BehindSeconds   int64 `json:"behindSeconds"`
	// Missing, Extra and Changed are keys the live etcd lacks, holds beyond the restored store,
	// or holds with another value or mod revision: at most 10 of all three, keys only.
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Reason says what was compared and found, or why nothing was.
	Reason string `json:"reason"`
}

// err is the drill's error for a live etcd that differs: nil unless it does.
func (l *Live) err() error {
	if l == nil || l.Outcome != backupv1alpha1.LiveDiffers {
		return nil
	}
	return &Error{Err: ErrLiveDiffers, Detail: l.Reason}
}

// compareLive compares ours, the restored store at res.Revision, with the live etcd, and
// records what it found in res.Live. It compacts ours (a scratch copy) to the live etcd's
// compact revision; it never writes to the live etcd. It returns an error only when the
// drill's own store fails it or its time runs out; what the live etcd does is res.Live's.
func compareLive(ctx context.Context, live LiveEtcd, ours *throwaway, now time.Time, res *Result) error {
	l := &Live{BehindSeconds: int64(now.Sub(res.NewestPoint) / time.Second)}
	res.Live = l
	if live == nil {
		l.Outcome, l.Reason = backupv1alpha1.LiveNotConfigured, "no live etcd configured for these backups"
		return nil
	}
	// Out of time, the drill judged nothing: its timeout's Error, not an etcd that did not answer.
	cutShort := func() error {
		return &Error{Err: ErrDrill, Detail: "comparing with the live etcd", Cause: ctx.Err()}
	}
	c, ep, err := live.Connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return cutShort()
		}
		l.Outcome, l.Reason = backupv1alpha1.LiveUnreachable, "the live etcd is not reachable: "+err.Error()
		return nil
	}
	defer c.Close()
	l.Endpoint = ep
	unreachable := func(what string, err error) error {
		if ctx.Err() != nil {
			return cutShort()
		}
		l.Outcome, l.Reason = backupv1alpha1.LiveUnreachable, fmt.Sprintf("the live etcd at %s did not answer %s: %v", ep, what, err)
		return nil
	}
	compacted := func() error {
		l.Outcome = backupv1alpha1.LiveCompacted
		l.Reason = fmt.Sprintf("the live etcd has compacted past revision %s: the restored store cannot be compared with it (the backups are older than its compaction retention)", thousands(res.Revision))
		return nil
	}

	sctx, cancel := context.WithTimeout(ctx, liveTimeout)
	st, err := c.Status(sctx, ep)
	cancel()
	if err != nil {
		return unreachable("its status", err)
	}
	l.Revision = st.Header.Revision
	l.BehindRevisions = l.Revision - res.Revision
	if l.Revision < res.Revision {
		l.Outcome = backupv1alpha1.LiveDiffers
		l.Reason = fmt.Sprintf("it is at revision %s, behind the restored revision %s: the backups are not of this etcd, or it lost writes", thousands(l.Revision), thousands(res.Revision))
		return nil
	}

	theirs, err := c.HashKV(ctx, ep, res.Revision)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return compacted()
	case err != nil:
		return unreachable("HashKV", err)
	}
	l.HashKV, l.CompactRevision = theirs.Hash, theirs.CompactRevision

	// HashKV covers every revision from the store's compaction to the one asked: the restored
	// copy, compacted as far as the live etcd, hashes as it does where their histories agree.
	notByHash := fmt.Sprintf("the live etcd keeps history %s, the restored store %s", history(l.CompactRevision), history(res.CompactRevision))
	if l.CompactRevision >= res.CompactRevision {
		if l.CompactRevision > res.CompactRevision {
			if _, err := ours.client.Compact(ctx, l.CompactRevision, clientv3.WithCompactPhysical()); err != nil {
				return &Error{Err: ErrDrill, Detail: fmt.Sprintf("compacting the restored store to revision %d", l.CompactRevision), Cause: err}
			}
		}
		h, err := ours.client.HashKV(ctx, ours.endpoint, res.Revision)
		if err != nil {
			return &Error{Err: ErrDrill, Detail: fmt.Sprintf("hashing the restored store at revision %d", res.Revision), Cause: err}
		}
		l.OurHashKV = h.Hash
		if h.Hash == l.HashKV {
			l.Outcome = backupv1alpha1.LiveMatches
			l.Reason = fmt.Sprintf("the live etcd's HashKV at revision %s (history %s) is the restored store's: %d",
				thousands(res.Revision), history(l.CompactRevision), h.Hash)
			return nil
		}
		// The deltas' puts restore without their leases, which HashKV covers.
		notByHash = fmt.Sprintf("HashKV differs (live %d, restored %d): in history or leases, or in keys", l.HashKV, h.Hash)
	}

	// The hashes cannot decide: every key at the restored revision, on both sides.
	l.ByKeys = true
	d, err := diffStores(ctx, ours.client, c, res.Revision, maxDiffKeys, true)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return compacted()
	case err != nil:
		return unreachable("a read of its keys", err)
	}
	l.Missing, l.Extra, l.Changed = d.missing, d.extra, d.changed
	if d.nMissing+d.nExtra+d.nChanged == 0 {
		l.Outcome = backupv1alpha1.LiveMatches
		l.Reason = fmt.Sprintf("the live etcd holds the restored store's %s keys, values and mod revisions at revision %s (%s)",
			thousands(res.Keys), thousands(res.Revision), notByHash)
		return nil
	}
	l.Outcome = backupv1alpha1.LiveDiffers
	l.Reason = fmt.Sprintf("at revision %s %s", thousands(res.Revision), strings.Join(d.parts(
		"it lacks %s %s that the backups hold",
		"it holds %s %s that the backups do not",
		"it holds %s %s with another value or mod revision"), "; "))
	return nil
}

// history says from where a store with compact revision rev keeps its history.
func history(rev int64) string {
	if rev <= 0 {
		return "from the start"
	}
	return "from revision " + thousands(rev)
}
