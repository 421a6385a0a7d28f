package etcdbr_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

const (
	liveKey      = "/registry/secrets/default/written-after-full"
	liveValue    = "the value the etcd holds"
	changedValue = "a value it never held!!" // as long: the same length of base64
)

// A backup the pinned etcdbrctl wrote of a real etcd that keeps running, drilled against that
// etcd: restored as it was, Exact; with one value in a delta changed (its checksum recomputed,
// so the backup itself checks out), NotRestorable naming the key; once the live etcd has
// compacted past the restored revision, Unverified.
func TestDrillAgainstTheLiveEtcd(t *testing.T) {
	ctx := context.Background()
	put := func(c *clientv3.Client, key, value string) int64 {
		resp, err := c.Put(ctx, key, value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	b := backUpForRealRestore(t,
		func(c *clientv3.Client) int64 {
			var rev int64
			for i := range 20 {
				rev = put(c, fmt.Sprintf("/registry/configmaps/default/cm-%02d", i), fmt.Sprintf("value %d", i))
			}
			return rev
		},
		func(c *clientv3.Client) int64 {
			put(c, "/registry/configmaps/default/cm-03", "updated after the full snapshot")
			return put(c, liveKey, liveValue)
		})
	live, err := clientv3.New(clientv3.Config{Endpoints: []string{b.live.ClientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// The live etcd moves on after the last delta: two revisions the backups do not hold.
	put(live, "/registry/configmaps/default/after-backup", "x")
	liveRev := put(live, "/registry/configmaps/default/after-backup", "y")
	liveEtcd := drill.LiveEndpoints([]string{b.live.ClientURL}, nil)

	t.Run("restored as it was: Exact", func(t *testing.T) {
		e := pinnedEtcdbrctl(t)
		res, err := b.drillWith(t, b.bucket, b.etcdbrOptions(t, e, b.store.Home, drill.Options{Live: liveEtcd}))
		if err != nil {
			t.Fatalf("drill: %v", err)
		}
		l := res.Live
		if l == nil || l.Outcome != backupv1alpha1.LiveMatches || l.ByKeys || l.HashKV != l.OurHashKV || l.Endpoint != b.live.ClientURL {
			t.Fatalf("live %+v, want Matches by HashKV at %s", l, b.live.ClientURL)
		}
		if l.Revision != liveRev || l.BehindRevisions != liveRev-res.Revision || l.BehindRevisions != 2 {
			t.Errorf("live revision %d, behind by %d; want %d, 2 behind the restored %d", l.Revision, l.BehindRevisions, liveRev, res.Revision)
		}
		if l.BehindSeconds < 0 || l.BehindSeconds > 120 {
			t.Errorf("behind by %d s, want the seconds since the last delta (%s)", l.BehindSeconds, res.NewestPoint)
		}
		report := drill.Report("shoot--drill--live", time.Now(), res, err)
		if report.Outcome != backupv1alpha1.OutcomeExact || res.RealRestore.Outcome != drill.RealRestoreAgrees ||
			report.Live == nil || report.Live.BehindRevisions != 2 || report.Live.Outcome != backupv1alpha1.LiveMatches {
			t.Errorf("report %s (real restore %s), live %+v; want Exact, Agrees, Matches 2 revisions behind", report.Outcome, res.RealRestore.Outcome, report.Live)
		}
		t.Logf("%s: %s; %d revisions, %d s behind", report.Outcome, report.Live.Reason, report.Live.BehindRevisions, report.Live.BehindSeconds)
	})

	t.Run("a value changed after the fact: NotRestorable", func(t *testing.T) {
		home := filepath.Join(t.TempDir(), "changed")
		copyTree(t, filepath.Join(b.store.Home, b.store.Container), filepath.Join(home, b.store.Container))
		changeDelta(t, filepath.Join(home, b.store.Container), b.deltas[len(b.deltas)-1], liveValue, changedValue)
		src, err := local.New(home).Open(b.store.Container, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.drillWith(t, src, drill.Options{Live: liveEtcd})
		if !errors.Is(err, drill.ErrLiveDiffers) {
			t.Fatalf("drill: %v (live %+v); want the live etcd to differ", err, res.Live)
		}
		l := res.Live
		if l.Outcome != backupv1alpha1.LiveDiffers || !l.ByKeys || !slices.Equal(l.Changed, []string{liveKey}) || len(l.Missing)+len(l.Extra) != 0 {
			t.Errorf("live %s by keys %t: changed %v, missing %v, extra %v; want Differs by keys, changed exactly %s", l.Outcome, l.ByKeys, l.Changed, l.Missing, l.Extra, liveKey)
		}
		want := fmt.Sprintf("the live etcd differs: at revision %s it holds 1 key with another value or mod revision: %s",
			thousandsOf(res.Revision), liveKey)
		if err.Error() != want {
			t.Errorf("error %q\nwant  %q", err, want)
		}
		report := drill.Report("shoot--drill--live", time.Now(), res, err)
		if report.Outcome != backupv1alpha1.OutcomeNotRestorable || report.Reason != want || report.NewestRestorablePoint != nil {
			t.Errorf("report %s, reason %q, point %v; want NotRestorable with the error and no point", report.Outcome, report.Reason, report.NewestRestorablePoint)
		}
		for _, v := range []string{liveValue, changedValue} {
			if strings.Contains(err.Error(), v) || strings.Contains(report.Live.Reason, v) {
				t.Errorf("a value in the error or the live reason: %q", v)
			}
		}
		t.Log(report.Reason)
	})

	// The live etcd compacts; the drill compacts its restored copy alike before it hashes.
	t.Run("the live etcd compacted before the restored revision: Matches", func(t *testing.T) {
		const compactAt = 10 // in the full snapshot's revisions: the deltas' history stays
		if _, err := live.Compact(ctx, compactAt, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		res, err := b.drillWith(t, b.bucket, drill.Options{Live: liveEtcd})
		if err != nil {
			t.Fatalf("drill: %v", err)
		}
		if l := res.Live; l.Outcome != backupv1alpha1.LiveMatches || l.ByKeys || l.CompactRevision != compactAt || res.CompactRevision >= compactAt {
			t.Errorf("live %+v, the restored store compacted at %d; want Matches by HashKV, the live etcd compacted at %d, the restored store before",
				l, res.CompactRevision, compactAt)
		}
	})

	// Last: it compacts the live etcd past the restored revision.
	t.Run("the live etcd compacted past the restored revision: Unverified", func(t *testing.T) {
		if _, err := live.Compact(ctx, liveRev, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		res, err := b.drillWith(t, b.bucket, drill.Options{Live: liveEtcd})
		if err != nil {
			t.Fatalf("drill: %v", err)
		}
		want := fmt.Sprintf("the live etcd has compacted past revision %s: the restored store cannot be compared with it (the backups are older than its compaction retention)", thousandsOf(res.Revision))
		if l := res.Live; l.Outcome != backupv1alpha1.LiveCompacted || l.Reason != want || l.BehindRevisions != 2 {
			t.Errorf("live %s, %q, %d behind; want Compacted, %q, 2 behind", l.Outcome, l.Reason, l.BehindRevisions, want)
		}
		report := drill.Report("shoot--drill--live", time.Now(), res, err)
		if report.Outcome != backupv1alpha1.OutcomeUnverified || report.Reason != want || backupv1alpha1.Passed(report.Outcome) {
			t.Errorf("report %s, reason %q; want Unverified (not a pass) with the live reason", report.Outcome, report.Reason)
		}
	})
}

// changeDelta replaces the value from with to (of the same length) in the gzipped delta at
// key in bucket, recomputes the SHA-256 etcd-backup-restore appends, and stores it
// uncompressed, under its name without .gz: a backup that checks out, but holds another value.
func changeDelta(t *testing.T, bucket, key, from, to string) {
	t.Helper()
	path := filepath.Join(bucket, filepath.FromSlash(key))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	events := data[:len(data)-sha256.Size]
	old, changed := base64.StdEncoding.EncodeToString([]byte(from)), base64.StdEncoding.EncodeToString([]byte(to))
	if bytes.Count(events, []byte(old)) != 1 {
		t.Fatalf("delta %s holds %q (%s) %d times, want once", key, from, old, bytes.Count(events, []byte(old)))
	}
	events = bytes.Replace(events, []byte(old), []byte(changed), 1)
	sum := sha256.Sum256(events)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strings.TrimSuffix(path, ".gz"), append(events, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A delta's put on a lease restores without it, as etcd-backup-restore's restore does: the
// restored store's HashKV is not the live etcd's though it holds the same keys, values and mod
// revisions. The drill compares them key by key and finds them equal; etcd-backup-restore's
// restore agrees: Exact. Without that restore, the live match alone is Restorable.
func TestDrillAgainstTheLiveEtcdKeyByKey(t *testing.T) {
	ctx := context.Background()
	b := backUpForRealRestore(t,
		func(c *clientv3.Client) int64 {
			resp, err := c.Put(ctx, "/registry/configmaps/default/cm", "v")
			if err != nil {
				t.Fatal(err)
			}
			return resp.Header.Revision
		},
		func(c *clientv3.Client) int64 {
			lease, err := c.Grant(ctx, 3600)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Put(ctx, leasedKey, "10.0.0.1", clientv3.WithLease(lease.ID))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Header.Revision
		})
	res, err := b.drillWith(t, b.bucket, b.etcdbrOptions(t, pinnedEtcdbrctl(t), b.store.Home,
		drill.Options{Live: drill.LiveEndpoints([]string{b.live.ClientURL}, nil)}))
	if err != nil {
		t.Fatalf("drill: %v", err)
	}
	l := res.Live
	if l.Outcome != backupv1alpha1.LiveMatches || !l.ByKeys || l.HashKV == l.OurHashKV || l.BehindRevisions != 0 {
		t.Fatalf("live %+v; want Matches key by key, the HashKVs apart, 0 revisions behind", l)
	}
	want := fmt.Sprintf("the live etcd holds the restored store's 2 keys, values and mod revisions at revision %d (HashKV differs (live %d, restored %d): in history or leases, or in keys)",
		res.Revision, l.HashKV, l.OurHashKV)
	if l.Reason != want {
		t.Errorf("reason %q\nwant   %q", l.Reason, want)
	}
	if report := drill.Report("shoot--drill--live", time.Now(), res, err); report.Outcome != backupv1alpha1.OutcomeExact || res.RealRestore.Outcome != drill.RealRestoreAgrees {
		t.Errorf("report %s (%s), real restore %s; want Exact, Agrees", report.Outcome, report.Reason, res.RealRestore.Outcome)
	}
	// The same drill without etcdbrctl: the replay and the live etcd alone.
	res.RealRestore = &drill.RealRestore{Outcome: drill.RealRestoreNotRun, NotRun: "no etcdbrctl configured"}
	want = "the live etcd matched, but etcd-backup-restore's restore was not run: no etcdbrctl configured"
	if report := drill.Report("shoot--drill--live", time.Now(), res, err); report.Outcome != backupv1alpha1.OutcomeRestorable || report.Reason != want {
		t.Errorf("without etcdbrctl: report %s, %q; want Restorable, %q", report.Outcome, report.Reason, want)
	}
}
