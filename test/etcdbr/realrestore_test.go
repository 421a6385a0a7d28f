package etcdbr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// realRestoreBackup is one etcd backed up by the pinned `etcdbrctl snapshot` into a local
// store, as the drill and etcdbrctl restore read it.
type realRestoreBackup struct {
	etcdbr *stack.EtcdBR
	store  *stack.BackupStore
	bucket objectstore.Store
	// deltas are the delta snapshots' keys, oldest first.
	deltas []string
	// live is the etcd backed up, still running until the test ends.
	live *stack.EtcdMember
}

// backUpForRealRestore runs a real etcd (v3.5, as etcd-druid's) with `etcdbrctl snapshot`:
// before its full snapshot it calls beforeFull with a client, then waits for the full
// snapshot, and calls each of rounds in turn, waiting after each for a delta that holds its
// last write. The snapshotter stops then; etcd runs on until the test ends.
func backUpForRealRestore(t *testing.T, beforeFull func(c *clientv3.Client) int64, rounds ...func(c *clientv3.Client) int64) realRestoreBackup {
	t.Helper()
	dir := t.TempDir()
	logs, err := os.Create(filepath.Join(dir, "etcdbr.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("etcd's and etcdbrctl snapshot's log:\n%s", tailString(string(out), 4000))
		}
		_ = logs.Close()
	})
	etcdbr, err := stack.NewEtcdBR(logs)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "buckets")
	store, err := etcdbr.BackupStore(local.Type, "real-restore", "shoot--drill--real/etcd-main",
		map[string][]byte{local.KeyHostPath: []byte(home)}, filepath.Join(dir, "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, store.Container), 0o700); err != nil {
		t.Fatal(err)
	}
	bucket, err := local.New(home).Open(store.Container, nil)
	if err != nil {
		t.Fatal(err)
	}
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "source", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := etcdbr.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{member.ClientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rev := beforeFull(c)
	opts := snapshotOptions
	opts.TempDir = filepath.Join(dir, "source", "temp")
	snapshotter, err := etcdbr.StartSnapshotter(etcd, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer snapshotter.Stop()
	waitFor := func(kind string, rev int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			for _, k := range keysUnder(t, bucket, store.SnapshotPrefix()) {
				if s, ok := stack.ParseSnapshot(k); ok && s.Kind == kind && s.LastRevision >= rev {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s snapshot up to revision %d within a minute: %v", kind, rev, keysUnder(t, bucket, store.SnapshotPrefix()))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("Full", rev)
	for _, round := range rounds {
		waitFor("Incr", round(c))
	}
	snapshotter.Stop()
	b := realRestoreBackup{etcdbr: etcdbr, store: store, bucket: bucket, live: member}
	for _, k := range keysUnder(t, bucket, store.SnapshotPrefix()) {
		if s, ok := stack.ParseSnapshot(k); ok && s.Kind == "Incr" {
			b.deltas = append(b.deltas, k)
		}
	}
	slices.SortFunc(b.deltas, func(x, y string) int {
		sx, _ := stack.ParseSnapshot(x)
		sy, _ := stack.ParseSnapshot(y)
		return int(sx.LastRevision - sy.LastRevision)
	})
	return b
}

// etcdbrctl is the pinned etcdbrctl, as the drill runs it.
func pinnedEtcdbrctl(t *testing.T) *drill.Etcdbrctl {
	t.Helper()
	dir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	e, err := drill.NewEtcdbrctl(context.Background(), filepath.Join(dir, "etcdbrctl"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// drill drills b's backups with etcdbrctl configured, etcdbrctl reading them from the local
// store under home (b's own, or a copy).
func (b realRestoreBackup) drill(t *testing.T, e *drill.Etcdbrctl, home string) (drill.Result, error) {
	t.Helper()
	return b.drillWith(t, b.bucket, b.etcdbrOptions(t, e, home, drill.Options{}))
}

// etcdbrOptions are opts with etcdbrctl configured, reading b's backups from the local store
// under home.
func (b realRestoreBackup) etcdbrOptions(t *testing.T, e *drill.Etcdbrctl, home string, opts drill.Options) drill.Options {
	t.Helper()
	where := objectstore.Where{Type: local.Type, Bucket: b.store.Container}
	es, err := drill.NewEtcdbrStore(where, nil, b.store.Prefix+"/", objectstore.NewRegistry(local.New(home)))
	if err != nil {
		t.Fatal(err)
	}
	opts.Etcdbrctl, opts.EtcdbrStore = e, es
	return opts
}

// drillWith drills b's prefix in src with opts, in a work directory of the test's.
func (b realRestoreBackup) drillWith(t *testing.T, src drill.Source, opts drill.Options) (drill.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts.WorkDir = t.TempDir()
	return drill.Run(ctx, src, b.store.Prefix+"/", opts)
}

// The drill runs the pinned etcdbrctl's restore on a backup of a full snapshot and deltas, and
// both restores agree: same revision, keys and digest; the status says so, naming the version.
func TestDrillRealRestoreAgrees(t *testing.T) {
	ctx := context.Background()
	put := func(c *clientv3.Client, from, n int) int64 {
		var rev int64
		for i := from; i < from+n; i++ {
			resp, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%03d", i), fmt.Sprintf("value %d", i))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	b := backUpForRealRestore(t,
		func(c *clientv3.Client) int64 { return put(c, 0, 20) },
		func(c *clientv3.Client) int64 {
			rev := put(c, 20, 10)
			resp, err := c.Delete(ctx, "/registry/configmaps/default/cm-003")
			if err != nil {
				t.Fatal(err)
			}
			return max(rev, resp.Header.Revision)
		})
	e := pinnedEtcdbrctl(t)
	res, err := b.drill(t, e, b.store.Home)
	if err != nil {
		t.Fatalf("drill with %s: %v", e.Tool(), err)
	}
	rr := res.RealRestore
	if rr == nil || rr.Outcome != drill.RealRestoreAgrees || !rr.Agrees {
		t.Fatalf("real restore %+v, want Agrees", rr)
	}
	if rr.Tool != "etcd-backup-restore v0.44.1" {
		t.Errorf("tool %q, want etcd-backup-restore v0.44.1 (scripts/versions.env's pin)", rr.Tool)
	}
	if rr.Revision != res.Revision || rr.Keys != res.Keys || rr.KVSHA256 != res.KVSHA256 || rr.HashKV != res.HashKV {
		t.Errorf("etcdbrctl restored revision %d, %d keys, %s, HashKV %d; the drill revision %d, %d keys, %s, HashKV %d",
			rr.Revision, rr.Keys, rr.KVSHA256, rr.HashKV, res.Revision, res.Keys, res.KVSHA256, res.HashKV)
	}
	if res.Keys != 29 || len(res.Deltas) == 0 {
		t.Errorf("the drill restored %d keys from %d deltas, want 29 keys (30 written, 1 deleted) and a delta at least", res.Keys, len(res.Deltas))
	}
	report := drill.Report("shoot--drill--real", time.Now(), res, err)
	want := fmt.Sprintf("etcd-backup-restore v0.44.1 agrees: it restores the same 29 keys and values at revision %d", res.Revision)
	if report.Outcome != backupv1alpha1.OutcomeRestorable || report.RealRestore != want {
		t.Errorf("report: %s, real restore %q; want Restorable, %q", report.Outcome, report.RealRestore, want)
	}
	t.Logf("%s: revision %d, %d keys, HashKV %d, from %s and %d deltas, etcdbrctl's restore took %s",
		report.RealRestore, res.Revision, res.Keys, res.HashKV, res.Full, len(res.Deltas), rr.Duration.Round(time.Millisecond))
}

// leaseInFullSnapshot is a round before the full snapshot: five keys, then leased on a lease of
// etcd's least TTL (2 s), kept alive in the source until the test ends, as kube-apiserver keeps
// its master leases.
func leaseInFullSnapshot(t *testing.T, leased string) func(c *clientv3.Client) int64 {
	return func(c *clientv3.Client) int64 {
		ctx := context.Background()
		for i := range 5 {
			if _, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		lease, err := c.Grant(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		keep, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		ch, err := c.KeepAlive(keep, lease.ID)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range ch {
			}
		}()
		resp, err := c.Put(ctx, leased, "10.0.0.1", clientv3.WithLease(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
}

// putRound is a round that writes key.
func putRound(t *testing.T, key string) func(c *clientv3.Client) int64 {
	return func(c *clientv3.Client) int64 {
		resp, err := c.Put(context.Background(), key, "written after the full snapshot")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
}

// slowCopy copies b's bucket for etcdbrctl to read, with the object at key behind a FIFO that
// gives its bytes delay after etcdbrctl opens it: a large object from a distant bucket, say.
// fed says whether they were given. It returns the copy's $HOME.
func (b realRestoreBackup) slowCopy(t *testing.T, key string, delay time.Duration) (home string, fed func() error) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "slow")
	copyTree(t, filepath.Join(b.store.Home, b.store.Container), filepath.Join(home, b.store.Container))
	fifo := filepath.Join(home, b.store.Container, filepath.FromSlash(key))
	content, err := os.ReadFile(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // until etcdbrctl opens it
		if err != nil {
			done <- err
			return
		}
		time.Sleep(delay)
		_, err = w.Write(content)
		done <- errors.Join(err, w.Close())
	}()
	t.Cleanup(func() {
		// Unblock the writer should etcdbrctl never have opened the FIFO.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			_, _ = io.Copy(io.Discard, r)
			_ = r.Close()
		}
	})
	return home, func() error {
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("etcdbrctl never read %s", key)
		}
	}
}

const (
	leasedKey = "/registry/masterleases/10.0.0.1"
	firstKey  = "/registry/configmaps/default/first-after-full"
	secondKey = "/registry/configmaps/default/second-after-full"
)

// etcd-backup-restore#1045 with the pinned etcdbrctl: the full snapshot holds a short lease with
// a key (as kube-apiserver's master leases), kept alive in the source; the first write after the
// full snapshot is the first delta's first event. etcdbrctl restore starts its embedded etcd on
// the full snapshot, then fetches the first delta; here the store serves that delta after 8 s,
// so the lease expires meanwhile (about 3 s after the embedded etcd leads): the embedded etcd
// revokes it, deleting its key at the revision of the first event, which its restore then takes
// as applied. It exits 0. The drill's replay keeps the lease alive and holds both keys; the
// comparison names them and the drill is NotRestorable.
func TestDrillRealRestoreCatchesLostWrite1045(t *testing.T) {
	b := backUpForRealRestore(t, leaseInFullSnapshot(t, leasedKey), putRound(t, firstKey))
	if len(b.deltas) == 0 {
		t.Fatal("no delta snapshot")
	}
	home, fed := b.slowCopy(t, b.deltas[0], 8*time.Second)
	e := pinnedEtcdbrctl(t)
	res, err := b.drill(t, e, home)
	if ferr := fed(); ferr != nil {
		t.Fatalf("feeding the first delta to etcdbrctl: %v (drill: %v)", ferr, err)
	}
	if !errors.Is(err, drill.ErrRealRestoreDiffers) {
		t.Fatalf("drill: %v (real restore %+v); want the real restore to differ", err, res.RealRestore)
	}
	rr := res.RealRestore
	if rr.Outcome != drill.RealRestoreDiffers || rr.Revision != res.Revision {
		t.Errorf("real restore outcome %s at revision %d, want Differs at the drill's %d", rr.Outcome, rr.Revision, res.Revision)
	}
	if !slices.Equal(rr.Missing, []string{firstKey, leasedKey}) || len(rr.Extra) != 0 || len(rr.Changed) != 0 {
		t.Errorf("etcdbrctl's store lacks %v, has extra %v, changed %v; want it to lack exactly %s and %s", rr.Missing, rr.Extra, rr.Changed, firstKey, leasedKey)
	}
	want := fmt.Sprintf("the real restore differs: etcd-backup-restore v0.44.1 restores revision %s without 2 keys that the backups hold: %s, %s",
		thousandsOf(res.Revision), firstKey, leasedKey)
	if err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	report := drill.Report("shoot--drill--real", time.Now(), res, err)
	if report.Outcome != backupv1alpha1.OutcomeNotRestorable || report.Reason != want ||
		report.RealRestore != "etcd-backup-restore v0.44.1 differs: it restores another store (reason)" {
		t.Errorf("report %s, reason %q, real restore %q; want NotRestorable with the error", report.Outcome, report.Reason, report.RealRestore)
	}
	t.Logf("%s (%s), the drill's replay: revision %d, %d keys", report.Reason, report.RealRestore, res.Revision, res.Keys)
}

// etcd-backup-restore#1046 with the pinned etcdbrctl: as above, but the lease expires while
// etcdbrctl waits for the second delta, after it applied the first: the revocation takes a
// revision, the second delta's events land one revision late, and etcdbrctl's check after it
// fails ("mismatched event revision"): it exits 1. The drill's replay restores the backups;
// the drill is NotRestorable with etcdbrctl's exit code and its error.
func TestDrillRealRestoreFailsWhereTheReplayRestores1046(t *testing.T) {
	b := backUpForRealRestore(t, leaseInFullSnapshot(t, leasedKey), putRound(t, firstKey), putRound(t, secondKey))
	if len(b.deltas) < 2 {
		t.Fatalf("deltas %v, want two", b.deltas)
	}
	home, fed := b.slowCopy(t, b.deltas[1], 8*time.Second)
	e := pinnedEtcdbrctl(t)
	res, err := b.drill(t, e, home)
	if ferr := fed(); ferr != nil {
		t.Fatalf("feeding the second delta to etcdbrctl: %v (drill: %v)", ferr, err)
	}
	if !errors.Is(err, drill.ErrRealRestoreFailed) || res.RealRestore.Outcome != drill.RealRestoreFails {
		t.Fatalf("drill: %v (real restore %+v); want the real restore to fail", err, res.RealRestore)
	}
	report := drill.Report("shoot--drill--real", time.Now(), res, err)
	for _, want := range []string{"the real restore fails: etcd-backup-restore v0.44.1 fails to restore the backups the drill restored (exit code 1): ",
		"fatal: Failed to restore snapshot: ", "mismatched event revision while applying delta snapshot"} {
		if !strings.Contains(report.Reason, want) {
			t.Errorf("reason %q lacks %q", report.Reason, want)
		}
	}
	if report.Outcome != backupv1alpha1.OutcomeNotRestorable || res.Keys != 8 {
		t.Errorf("report %s, the replay's %d keys; want NotRestorable, 8 keys", report.Outcome, res.Keys)
	}
	t.Logf("%s; the drill's replay: revision %d, %d keys", report.Reason, res.Revision, res.Keys)
}

func thousandsOf(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// keysUnder lists the keys under prefix in store.
func keysUnder(t *testing.T, bucket objectstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := bucket.List(context.Background(), prefix, func(page []string) error {
		keys = append(keys, page...)
		return nil
	}); err != nil {
		t.Fatalf("listing %q: %v", prefix, err)
	}
	return keys
}

// copyTree copies the regular files and directories under from to to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
