package drill

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// backups is what the pinned etcdbrctl wrote of a real etcd: its bucket directory and prefix,
// the source etcd (still running, for reading at any revision) and the revision the last
// delta ends at.
type backups struct {
	bucket   string
	prefix   string
	source   *clientv3.Client
	endpoint string
	revision int64
	// samples are keys whose state the drill must reproduce: updated, deleted, written in one
	// transaction, deleted by range, binary, on a lease.
	samples []string
}

// backUp runs etcd (v3.5, as etcd-backup-restore links it) and `etcdbrctl snapshot` saving
// to a Local store, writes keys before the full snapshot and in rounds after it — puts,
// updates, deletes, a multi-key transaction, a range delete — each round waited for in a
// delta of its own, and stops the snapshotter.
func backUp(t *testing.T) *backups {
	t.Helper()
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := startSource(t, binDir, dir)
	br, etcd, member, c := &stack.EtcdBR{BinDir: binDir, Logs: src.logs}, src.etcd, src.member, src.client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	b := &backups{source: c, endpoint: member.ClientURL}
	var rev int64
	must := func(r int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	put := func(k, v string, opts ...clientv3.OpOption) {
		t.Helper()
		resp, err := c.Put(ctx, k, v, opts...)
		if err != nil {
			must(0, err)
		}
		must(resp.Header.Revision, nil)
	}
	del := func(k string, opts ...clientv3.OpOption) {
		t.Helper()
		resp, err := c.Delete(ctx, k, opts...)
		if err != nil {
			must(0, err)
		}
		if resp.Deleted == 0 {
			t.Fatalf("deleting %s deleted nothing", k)
		}
		must(resp.Header.Revision, nil)
	}
	pod := func(i int) string { return fmt.Sprintf("/registry/pods/team/pod-%02d", i) }

	// Before the full snapshot: pods, and a master lease on a TTL shorter than the drill
	// takes, which the source keeps alive (kube-apiserver's live 15 s). Not much shorter:
	// etcd-backup-restore's restore, which keeps no lease alive, must finish within it on a
	// loaded machine (TestDrillFunction).
	lease, err := c.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	alive, err := c.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range alive {
		}
	}()
	put("/registry/masterleases/10.0.0.1", `{"kind":"Endpoints"}`, clientv3.WithLease(lease.ID))
	for i := range 30 {
		put(pod(i), fmt.Sprintf(`{"spec":{"n":%d}}`, i))
	}

	const container = "bucket"
	home := filepath.Join(dir, "home")
	store := &stack.BackupStore{Provider: "Local", Container: container, Prefix: "shoot--drill--test/etcd-main", Home: home}
	b.bucket, b.prefix = filepath.Join(home, container), store.SnapshotPrefix()
	snapshotter, err := br.StartSnapshotter(etcd, store, stack.SnapshotOptions{
		FullSnapshotSchedule: "0 0 * * *", // only the one taken at start
		DeltaSnapshotPeriod:  time.Second,
		MaxBackups:           7,
		TempDir:              filepath.Join(dir, "snapshotter"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snapshotter.Stop)
	b.wait(t, KindFull, rev)

	rounds := []func(){
		func() { // updates and deletes
			for i := range 5 {
				put(pod(i), fmt.Sprintf(`{"spec":{"n":%d,"updated":true}}`, i))
			}
			for i := 5; i < 8; i++ {
				del(pod(i))
			}
		},
		func() { // one revision, three keys
			resp, err := c.Txn(ctx).Then(
				clientv3.OpPut("/registry/configmaps/team/a", "a"),
				clientv3.OpPut("/registry/configmaps/team/b", "b"),
				clientv3.OpDelete(pod(8)),
			).Commit()
			if err != nil {
				t.Fatal(err)
			}
			must(resp.Header.Revision, nil)
			put(pod(9), "re-put")
		},
		func() { // one revision deleting pods 20..29
			del("/registry/pods/team/pod-2", clientv3.WithPrefix())
			put(pod(0), "updated again")
		},
		func() { // a binary key and value; a key deleted and written again
			put("/registry/secrets/team/\x00\xff", string([]byte{0, 1, 2, 0xfe, 0xff}))
			del(pod(10))
			put(pod(10), "back")
		},
	}
	for _, round := range rounds {
		round()
		b.wait(t, KindDelta, rev)
	}
	snapshotter.Stop()
	b.revision = rev
	b.samples = []string{
		"/registry/masterleases/10.0.0.1", pod(0), pod(4), pod(5), pod(8), pod(9), pod(10), pod(11), pod(25),
		"/registry/configmaps/team/a", "/registry/secrets/team/\x00\xff",
	}
	return b
}

// source is a real etcd the tests back up: running in dir/source, its log in dir/etcd.log (its
// last 4 KiB shown when the test fails, with whatever else the test writes there, etcdbrctl's).
type source struct {
	etcd   *stack.Etcd
	member *stack.EtcdMember
	client *clientv3.Client
	logs   *os.File
}

// startSource starts the etcd in binDir in dir, and a client of it; both end with the test.
func startSource(t *testing.T, binDir, dir string) *source {
	t.Helper()
	logs, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logs.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logs.Name())
			t.Logf("etcd's and etcdbrctl's log, last 4 KiB:\n%s", data[max(0, len(data)-4096):])
		}
	})
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "source", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := (&stack.EtcdBR{BinDir: binDir, Logs: logs}).StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{member.ClientURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &source{etcd: etcd, member: member, client: c, logs: logs}
}

// wait waits until a snapshot of kind covers revision.
func (b *backups) wait(t *testing.T, kind string, revision int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var keys []string
	for time.Now().Before(deadline) {
		keys = b.keys(t)
		for _, k := range keys {
			if s, ok := ParseSnapshot(k); ok && s.Kind == kind && s.LastRevision >= revision {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s snapshot up to revision %d within 30 s: %q", kind, revision, keys)
}

func (b *backups) keys(t *testing.T) []string {
	t.Helper()
	var keys []string
	err := localDir(t, b.bucket).List(context.Background(), b.prefix, func(page []string) error {
		keys = append(keys, page...)
		return nil
	})
	if err != nil && !errors.Is(err, objectstore.ErrBucketNotFound) { // none until the first snapshot
		t.Fatal(err)
	}
	return keys
}

// localDir is the bucket directory dir read through housekeeper's local provider, as
// etcd-backup-restore's Local provider writes it ($HOME/<container>).
func localDir(t *testing.T, dir string) objectstore.Store {
	t.Helper()
	s, err := local.New(filepath.Dir(dir)).Open(filepath.Base(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// copyBucket copies the bucket directory for a test to damage.
func (b *backups) copyBucket(t *testing.T) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "bucket")
	copyTree(t, b.bucket, to)
	return to
}

// sourceDigest is Result.KVSHA256 of the source at rev, computed here on its own.
func sourceDigest(t *testing.T, c *clientv3.Client, rev int64) (int64, string) {
	t.Helper()
	resp, err := c.Get(context.Background(), "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, kv := range resp.Kvs {
		for _, b := range [][]byte{kv.Key, kv.Value} {
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
			h.Write(b)
		}
	}
	return resp.Count, hex.EncodeToString(h.Sum(nil))
}

func TestDrill(t *testing.T) {
	b := backUp(t)
	ctx := context.Background()
	keys := b.keys(t)
	chain, err := LatestChain(keys)
	if err != nil {
		t.Fatalf("%v in %q", err, keys)
	}
	if len(chain.Deltas) < 4 {
		t.Fatalf("want a full snapshot and a delta per round of writes, got %q", keys)
	}

	t.Run("restores the source's state at the last delta's revision", func(t *testing.T) {
		// Longer than the master lease's TTL: restored, it would expire and delete its key at a
		// revision the source never had, unless the drill keeps it alive.
		afterStart = func() { time.Sleep(12 * time.Second) }
		defer func() { afterStart = nil }()
		work := t.TempDir()
		checked := 0
		// The full snapshot's 31 keys need 64 MiB and 16 KiB, 65 MiB rounded up: a share of
		// exactly that fits.
		res, err := Run(ctx, localDir(t, b.bucket), b.prefix, Options{WorkDir: work, MemoryShare: 65 << 20, Check: func(ctx context.Context, c *clientv3.Client, rev int64) error {
			for _, k := range b.samples {
				got, err := c.Get(ctx, k, clientv3.WithRev(rev))
				if err != nil {
					return err
				}
				want, err := b.source.Get(ctx, k, clientv3.WithRev(rev))
				if err != nil {
					return err
				}
				if len(got.Kvs) != len(want.Kvs) {
					t.Errorf("%q: restored %d keys, source has %d", k, len(got.Kvs), len(want.Kvs))
					continue
				}
				for i, g := range got.Kvs {
					w := want.Kvs[i]
					if !bytes.Equal(g.Value, w.Value) || g.ModRevision != w.ModRevision || g.CreateRevision != w.CreateRevision || g.Version != w.Version || g.Lease != w.Lease {
						t.Errorf("%q: restored %+v, source has %+v", k, g, w)
					}
				}
			}
			checked++
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if checked != 1 {
			t.Errorf("Check ran %d times", checked)
		}
		if res.Revision != b.revision {
			t.Errorf("restored revision %d, the source's last write was at %d", res.Revision, b.revision)
		}
		wantKeys, wantDigest := sourceDigest(t, b.source, b.revision)
		if res.Keys != wantKeys || res.KVSHA256 != wantDigest {
			t.Errorf("restored %d keys with digest %s, the source has %d with %s", res.Keys, res.KVSHA256, wantKeys, wantDigest)
		}
		hkv, err := b.source.HashKV(ctx, b.endpoint, b.revision)
		if err != nil {
			t.Fatal(err)
		}
		if res.HashKV != hkv.Hash {
			t.Errorf("HashKV %d at revision %d, the source's is %d", res.HashKV, res.Revision, hkv.Hash)
		}
		var deltas []string
		for _, d := range chain.Deltas {
			deltas = append(deltas, d.Key)
		}
		if res.Full != chain.Full.Key || strings.Join(res.Deltas, " ") != strings.Join(deltas, " ") {
			t.Errorf("restored %s + %q, want %s + %q", res.Full, res.Deltas, chain.Full.Key, deltas)
		}
		if !res.NewestPoint.Equal(chain.Last().CreatedOn) || time.Since(res.NewestPoint) > time.Minute {
			t.Errorf("newest point %v, the last delta was taken %v", res.NewestPoint, chain.Last().CreatedOn)
		}
		if res.FullRevision != chain.Full.LastRevision || res.Leases != 1 || res.Events == 0 || res.DBSize == 0 || res.ReadBytes == 0 {
			t.Errorf("full snapshot at revision %d (named %d), %d leases, %d events, db %d bytes, %d bytes read",
				res.FullRevision, chain.Full.LastRevision, res.Leases, res.Events, res.DBSize, res.ReadBytes)
		}
		emptyWorkDir(t, work)
		t.Logf("%+v", res)
	})

	t.Run("a caller's check that fails", func(t *testing.T) {
		missing := errors.New("no namespace kube-system")
		_, err := Run(ctx, localDir(t, b.bucket), b.prefix, Options{WorkDir: t.TempDir(), Check: func(context.Context, *clientv3.Client, int64) error {
			return missing
		}})
		want := "delta " + chain.Last().Key + ": check failed: the store restored up to it: no namespace kube-system"
		if !errors.Is(err, ErrCheck) || !errors.Is(err, missing) || fmt.Sprint(err) != want {
			t.Fatalf("error %v, want %q", err, want)
		}
	})

	t.Run("a store whose keys need more than the drill's memory share", func(t *testing.T) {
		work := t.TempDir()
		start := time.Now()
		res, err := Run(ctx, localDir(t, b.bucket), b.prefix, Options{WorkDir: work, MemoryShare: 64 << 20})
		want := "full snapshot " + chain.Full.Key + ": memory share too small: its 31 keys need about 65Mi, above the 64Mi this drill may use (memoryBudget over concurrency): raise memoryBudget or lower concurrency"
		if !errors.Is(err, ErrMemoryShare) || fmt.Sprint(err) != want {
			t.Fatalf("error %v, want %q", err, want)
		}
		// The drill could not judge the backup: an Error, never NotRestorable.
		if r := Report("shoot--drill--test", start, res, err); r.Outcome != backupv1alpha1.OutcomeError || r.Reason != want {
			t.Errorf("reported %s: %s, want Error: %s", r.Outcome, r.Reason, want)
		}
		emptyWorkDir(t, work)
	})

	// Each case damages a copy of the bucket as a failing disk, upload or garbage collection
	// would, and wants the drill to fail naming the object.
	middle := chain.Deltas[len(chain.Deltas)/2]
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, bucket string)
		err    error
		says   []string
	}{{
		name: "a delta whose events differ from their SHA-256",
		damage: func(t *testing.T, bucket string) {
			rewriteGzip(t, bucket, middle.Key, func(data []byte) []byte {
				i := bytes.Index(data, []byte(`"value":"`)) + len(`"value":"`)
				data[i] ^= 'A' ^ 'B' // still base64, still JSON: only the SHA-256 tells
				return data
			})
		},
		err:  ErrChecksumMismatch,
		says: []string{"delta " + middle.Key + ": checksum mismatch: the SHA-256 of its"},
	}, {
		name: "a delta whose gzip stream is damaged",
		damage: func(t *testing.T, bucket string) {
			path := filepath.Join(bucket, filepath.FromSlash(middle.Key))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-8] ^= 0xff // gzip's CRC-32 of the content
			writeFile(t, path, data)
		},
		err:  ErrChecksumMismatch,
		says: []string{"delta " + middle.Key + ": checksum mismatch: its .gz stream's checksum"},
	}, {
		name: "a delta missing in the middle",
		damage: func(t *testing.T, bucket string) {
			if err := os.Remove(filepath.Join(bucket, filepath.FromSlash(middle.Key))); err != nil {
				t.Fatal(err)
			}
		},
		err: ErrRevisionGap,
		says: []string{
			"delta " + chain.Deltas[len(chain.Deltas)/2+1].Key + ": revision gap",
			fmt.Sprintf("revisions %d..%d are in no snapshot", middle.StartRevision, middle.LastRevision),
			"the last of delta " + chain.Deltas[len(chain.Deltas)/2-1].Key,
		},
	}, {
		name: "a truncated full snapshot",
		damage: func(t *testing.T, bucket string) {
			path := filepath.Join(bucket, filepath.FromSlash(chain.Full.Key))
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		err:  ErrTruncated,
		says: []string{"full snapshot " + chain.Full.Key + ": truncated: its .gz stream ends after"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := b.copyBucket(t)
			tc.damage(t, bucket)
			work := t.TempDir()
			res, err := Run(ctx, localDir(t, bucket), b.prefix, Options{WorkDir: work})
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if res.Full != chain.Full.Key {
				t.Errorf("result names full snapshot %q, want %q", res.Full, chain.Full.Key)
			}
			emptyWorkDir(t, work)
			t.Log(err)
		})
	}
}

// The full snapshot's name carries the revision etcd-backup-restore read just before asking
// for the snapshot, so writes in between land both in its db and in the first delta, and the
// restorer skips them there. The snapshotter only does that in a race; here the first delta is
// made to start two revisions early, with the source's own events of those revisions, marshalled
// as the snapshotter marshals them.
func TestDrillFirstDeltaOverlappingTheFullSnapshot(t *testing.T) {
	b := backUp(t)
	ctx := context.Background()
	chain, err := LatestChain(b.keys(t))
	if err != nil {
		t.Fatal(err)
	}
	first := chain.Deltas[0]
	from := chain.Full.LastRevision - 1
	overlap := func(t *testing.T, change func(*clientv3.Event)) (string, string) {
		t.Helper()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var events []*clientv3.Event
		for resp := range b.source.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from)) {
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= chain.Full.LastRevision {
					events = append(events, ev)
				}
			}
			if len(events) > 0 && resp.Events[len(resp.Events)-1].Kv.ModRevision >= chain.Full.LastRevision {
				break
			}
		}
		if len(events) != 2 {
			t.Fatalf("%d events in revisions %d..%d, want one each", len(events), from, chain.Full.LastRevision)
		}
		change(events[0])
		bucket := b.copyBucket(t)
		var key string
		rewriteGzip(t, bucket, first.Key, func(data []byte) []byte {
			out := []byte{'['}
			for _, ev := range events {
				j, err := json.Marshal(map[string]any{"etcdEvent": ev, "time": time.Now()})
				if err != nil {
					t.Fatal(err)
				}
				out = append(append(out, j...), ',')
			}
			out = append(out, data[1:len(data)-sha256.Size]...)
			sum := sha256.Sum256(out)
			return append(out, sum[:]...)
		})
		key = strings.Replace(first.Key, fmt.Sprintf("Incr-%08d-", first.StartRevision), fmt.Sprintf("Incr-%08d-", from), 1)
		if err := os.Rename(filepath.Join(bucket, filepath.FromSlash(first.Key)), filepath.Join(bucket, filepath.FromSlash(key))); err != nil {
			t.Fatal(err)
		}
		return bucket, key
	}

	t.Run("events the db holds are checked and skipped", func(t *testing.T) {
		bucket, key := overlap(t, func(*clientv3.Event) {})
		res, err := Run(ctx, localDir(t, bucket), b.prefix, Options{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		wantKeys, wantDigest := sourceDigest(t, b.source, b.revision)
		if res.Deltas[0] != key || res.SkippedEvents != 2 || res.Revision != b.revision || res.Keys != wantKeys || res.KVSHA256 != wantDigest {
			t.Errorf("first delta %s, %d events skipped, revision %d, %d keys %s; want %s, 2, %d, %d keys %s",
				res.Deltas[0], res.SkippedEvents, res.Revision, res.Keys, res.KVSHA256, key, b.revision, wantKeys, wantDigest)
		}
	})
	t.Run("an overlapping event the db does not hold", func(t *testing.T) {
		bucket, key := overlap(t, func(ev *clientv3.Event) { ev.Kv.Value = []byte("not what the db has") })
		_, err := Run(ctx, localDir(t, bucket), b.prefix, Options{WorkDir: t.TempDir()})
		want := fmt.Sprintf("delta %s: revision mismatch: event 1 at revision %d puts key", key, from)
		if !errors.Is(err, ErrRevisionMismatch) || !strings.Contains(fmt.Sprint(err), want) || !strings.HasSuffix(fmt.Sprint(err), "which has another value there") {
			t.Fatalf("error %v, want %v saying %q", err, ErrRevisionMismatch, want)
		}
		t.Log(err)
	})
}

// Two leaders' snapshotters around a leader election (etcd-backup-restore#1043): the old
// leader's delta ends at one revision, the new leader's starts where the old one's did and goes
// on, and the next delta follows the new leader's. Made here from the backups by replacing the
// third delta with a new leader's delta over the second's and the third's revisions, its events
// the source's.
func TestDrillOverlappingDeltas(t *testing.T) {
	b := backUp(t)
	ctx := context.Background()
	chain, err := LatestChain(b.keys(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(chain.Deltas) < 4 {
		t.Fatalf("%d deltas, want 4", len(chain.Deltas))
	}
	old, next := chain.Deltas[1], chain.Deltas[2]
	if next.Compression != ".gz" {
		t.Fatalf("delta %s is not gzipped", next.Key)
	}
	var shared int64 // the events of old's revisions
	newLeader := func(t *testing.T, change func([]*clientv3.Event)) (bucket, key string) {
		t.Helper()
		events := sourceEvents(t, b.source, old.StartRevision, next.LastRevision)
		shared = 0
		for _, ev := range events {
			if ev.Kv.ModRevision <= old.LastRevision {
				shared++
			}
		}
		if shared == 0 || shared == int64(len(events)) {
			t.Fatalf("%d of %d events in revisions %d..%d are in %s", shared, len(events), old.StartRevision, next.LastRevision, old.Key)
		}
		change(events)
		bucket = b.copyBucket(t)
		key = strings.TrimSuffix(b.prefix, "/") + "/" + fmt.Sprintf("Incr-%08d-%08d-%d.gz", old.StartRevision, next.LastRevision, next.CreatedOn.Unix()+1)
		writeDelta(t, filepath.Join(bucket, filepath.FromSlash(key)), events)
		if err := os.Remove(filepath.Join(bucket, filepath.FromSlash(next.Key))); err != nil {
			t.Fatal(err)
		}
		return bucket, key
	}

	t.Run("their shared events agree", func(t *testing.T) {
		bucket, key := newLeader(t, func([]*clientv3.Event) {})
		res, err := Run(ctx, localDir(t, bucket), b.prefix, Options{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		wantKeys, wantDigest := sourceDigest(t, b.source, b.revision)
		if len(res.OverlappingDeltas) != 1 || res.OverlappingDeltas[0] != key || res.Revision != b.revision || res.Keys != wantKeys || res.KVSHA256 != wantDigest {
			t.Errorf("overlapping deltas %q, revision %d, %d keys %s; want [%s], %d, %d keys %s",
				res.OverlappingDeltas, res.Revision, res.Keys, res.KVSHA256, key, b.revision, wantKeys, wantDigest)
		}
		if res.SkippedEvents != shared {
			t.Errorf("%d events skipped, want the %d the two deltas share", res.SkippedEvents, shared)
		}
		r := Report("shoot--drill--test", time.Now(), res, nil)
		if r.Outcome != backupv1alpha1.OutcomeRestorable || !strings.Contains(r.Reason, "overlapping deltas (two leaders wrote them): 1; their shared events agree and were applied once") {
			t.Errorf("report %s %q, want Restorable naming the overlap", r.Outcome, r.Reason)
		}
	})
	t.Run("a shared event differs", func(t *testing.T) {
		bucket, key := newLeader(t, func(events []*clientv3.Event) {
			for _, ev := range events {
				if ev.Type == clientv3.EventTypePut {
					ev.Kv.Value = []byte("not what the old leader saw")
					return
				}
			}
			t.Fatal("no put among the shared events")
		})
		_, err := Run(ctx, localDir(t, bucket), b.prefix, Options{WorkDir: t.TempDir()})
		want := fmt.Sprintf("delta %s: revision mismatch: event", key)
		tail := fmt.Sprintf("within the deltas before it, applied up to %d, which has another value there", old.LastRevision)
		if !errors.Is(err, ErrRevisionMismatch) || !strings.Contains(fmt.Sprint(err), want) || !strings.HasSuffix(fmt.Sprint(err), tail) {
			t.Fatalf("error %v, want %v saying %q … %q", err, ErrRevisionMismatch, want, tail)
		}
		t.Log(err)
	})
	t.Run("etcd-backup-restore's restore", func(t *testing.T) {
		bucket, _ := newLeader(t, func([]*clientv3.Event) {})
		prefix := strings.TrimSuffix(b.prefix, "v2/")
		opts := etcdbrOptions(t, bucket, prefix)
		res, err := Run(ctx, localDir(t, bucket), prefix, opts)
		r := Report("shoot--drill--test", time.Now(), res, err)
		t.Logf("%s: %s; real restore: %s", r.Outcome, r.Reason, r.RealRestore)
		if res.Revision != b.revision {
			t.Errorf("replay restored revision %d, want %d", res.Revision, b.revision)
		}
		want := fmt.Sprintf("overlapping deltas, written by two leaders: 1 (first Incr-%08d-%08d-", old.StartRevision, next.LastRevision)
		if !errors.Is(err, ErrRealRestoreFailed) || r.Outcome != backupv1alpha1.OutcomeNotRestorable || !strings.Contains(r.Reason, want) ||
			!strings.Contains(r.Reason, "which etcd-backup-restore v0.44.1 does not restore (etcd-backup-restore#1043)") ||
			!strings.Contains(r.Reason, "mismatched event revision") {
			t.Errorf("drill: %v; report %s %q; want NotRestorable: etcd-backup-restore's restore fails on the overlap", err, r.Outcome, r.Reason)
		}
	})
}

// etcdbrOptions are drill options that run the pinned etcdbrctl's restore of the backups under
// prefix in the bucket directory.
func etcdbrOptions(t *testing.T, bucket, prefix string) Options {
	t.Helper()
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEtcdbrctl(context.Background(), filepath.Join(binDir, "etcdbrctl"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewEtcdbrStore(objectstore.Where{Type: local.Type, Bucket: filepath.Base(bucket)}, nil, prefix,
		objectstore.NewRegistry(local.New(filepath.Dir(bucket))))
	if err != nil {
		t.Fatal(err)
	}
	return Options{WorkDir: t.TempDir(), Etcdbrctl: e, EtcdbrStore: store}
}

// sourceEvents are the source's events of revisions from..to, as a watch delivers them.
func sourceEvents(t *testing.T, c *clientv3.Client, from, to int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []*clientv3.Event
	for resp := range c.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from)) {
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision <= to {
				events = append(events, ev)
			}
		}
		if n := len(resp.Events); n > 0 && resp.Events[n-1].Kv.ModRevision >= to {
			return events
		}
	}
	t.Fatalf("watching revisions %d..%d: %v", from, to, ctx.Err())
	return nil
}

// writeDelta writes events as etcd-backup-restore's snapshotter writes a gzipped delta: a JSON
// array of {etcdEvent, time} followed by its SHA-256.
func writeDelta(t *testing.T, path string, events []*clientv3.Event) {
	t.Helper()
	data := []byte{'['}
	for i, ev := range events {
		j, err := json.Marshal(map[string]any{"etcdEvent": ev, "time": time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, j...)
	}
	data = append(data, ']')
	sum := sha256.Sum256(data)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(append(data, sum[:]...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, out.Bytes())
}

// rewriteGzip changes the decompressed content of the object at key and compresses it again.
func rewriteGzip(t *testing.T, bucket string, key string, change func([]byte) []byte) {
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
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	data = change(data)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, out.Bytes())
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// emptyWorkDir fails unless the drill removed everything it made in work.
func emptyWorkDir(t *testing.T, work string) {
	t.Helper()
	left, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the drill left %d entries in its work directory: %v", len(left), left)
	}
}
