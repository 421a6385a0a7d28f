package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// A shoot's etcd is v3.4 unless etcd-druid's UpgradeEtcdVersion is on: a snapshot a real etcd
// v3.4.34 takes, of keys written, overwritten, deleted and on a lease across a compaction,
// restores with the drill's etcd v3.6 code to the server's keys and values at its revision, and
// the server, asked live, holds what was restored.
func TestDrillRestoresAnEtcd34Snapshot(t *testing.T) {
	dir := t.TempDir()
	src := startEtcd34(t, dir)
	c, member := src.client, src.member
	ctx := context.Background()

	lease, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	for i := range 50 {
		resp, err := c.Put(ctx, "/registry/pods/team/pod-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "v1")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := c.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	for _, op := range []clientv3.Op{
		clientv3.OpPut("/registry/pods/team/pod-aa", "v2"),
		clientv3.OpDelete("/registry/pods/team/pod-b", clientv3.WithPrefix()),
		clientv3.OpPut("/registry/masterleases/10.0.0.1", "lease", clientv3.WithLease(lease.ID)),
		clientv3.OpPut("/registry/secrets/team/\x00\xff", string([]byte{0, 0xfe, 0xff})),
	} {
		resp, err := c.Do(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if op.IsPut() {
			rev = resp.Put().Header.Revision
		} else {
			rev = resp.Del().Header.Revision
		}
	}

	// The snapshot function's layout: the server's snapshot stream, its SHA-256 at the end.
	cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "etcd-v3-4"}}
	bucket := filepath.Join(dir, "bucket")
	path := filepath.Join(bucket, filepath.FromSlash(destination.ConfigKey(cfg, time.Now())))
	stream, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(stream); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()

	start := time.Now()
	res, err := Run(ctx, localDir(t, bucket), destination.ConfigPrefix(cfg), Options{Layout: LayoutSnapshots, WorkDir: t.TempDir(),
		Live: LiveEndpoints([]string{member.ClientURL}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys, wantDigest := sourceDigest(t, c, rev)
	if res.Revision != rev || res.Keys != wantKeys || res.KVSHA256 != wantDigest || res.Leases != 1 {
		t.Errorf("restored revision %d, %d keys, digest %s, %d leases: want %d, %d, %s and the one lease",
			res.Revision, res.Keys, res.KVSHA256, res.Leases, rev, wantKeys, wantDigest)
	}
	if res.Live == nil || res.Live.Outcome != backupv1alpha1.LiveMatches {
		t.Errorf("the live etcd v3.4: %+v, want Matches", res.Live)
	}
	if r := Report(cfg.Namespace+"/"+cfg.Name, start, res, err); r.Outcome != backupv1alpha1.OutcomeExact {
		t.Errorf("reported %s: %s, want Exact", r.Outcome, r.Reason)
	}
	t.Logf("%+v; live: %+v", res, res.Live)
}

// The shoot's etcd v3.4 backed up as etcd-druid runs it: the pinned etcdbrctl's snapshotter
// (which links etcd v3.5) takes a full snapshot and deltas of a real etcd v3.4.34; the drill
// restores them, etcdbrctl's own restore agrees, and the live v3.4 server holds what both
// restored: Exact.
func TestDrillEtcdbrctlBackupsOfAnEtcd34(t *testing.T) {
	etcdbrDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := startEtcd34(t, dir)
	c, member := src.client, src.member
	ctx := context.Background()
	var rev int64
	put := func(k, v string) {
		t.Helper()
		resp, err := c.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	for i := range 20 {
		put(fmt.Sprintf("/registry/pods/team/pod-%02d", i), "v1")
	}

	home := filepath.Join(dir, "home")
	store := &stack.BackupStore{Provider: "Local", Container: "bucket", Prefix: "shoot--drill--v34/etcd-main", Home: home}
	b := &backups{bucket: filepath.Join(home, store.Container), prefix: store.SnapshotPrefix()}
	snapshotter, err := (&stack.EtcdBR{BinDir: etcdbrDir, Logs: src.logs}).StartSnapshotter(src.etcd, store, stack.SnapshotOptions{
		FullSnapshotSchedule: "0 0 * * *", DeltaSnapshotPeriod: time.Second, MaxBackups: 7, TempDir: filepath.Join(dir, "snapshotter"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snapshotter.Stop)
	b.wait(t, KindFull, rev)
	for i := range 5 {
		put(fmt.Sprintf("/registry/pods/team/pod-%02d", i), "v2")
	}
	if _, err := c.Delete(ctx, "/registry/pods/team/pod-1", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	put("/registry/configmaps/team/after", "a")
	b.wait(t, KindDelta, rev)
	snapshotter.Stop()

	prefix := strings.TrimSuffix(store.SnapshotPrefix(), "v2/")
	opts := etcdbrOptions(t, b.bucket, prefix)
	opts.Live = LiveEndpoints([]string{member.ClientURL}, nil)
	start := time.Now()
	res, err := Run(ctx, localDir(t, b.bucket), prefix, opts)
	r := Report("shoot--drill--v34", start, res, err)
	if err != nil || res.Revision != rev || len(res.Deltas) == 0 {
		t.Fatalf("drill: revision %d, %d deltas, %v; want revision %d from a full snapshot and deltas", res.Revision, len(res.Deltas), err, rev)
	}
	if r.Outcome != backupv1alpha1.OutcomeExact || res.RealRestore.Outcome != RealRestoreAgrees || res.Live.Outcome != backupv1alpha1.LiveMatches {
		t.Errorf("reported %s (%s): real restore %+v, live %+v; want Exact, Agrees, Matches", r.Outcome, r.Reason, res.RealRestore, res.Live)
	}
	t.Logf("%s: real restore %s; live %s", r.Outcome, r.RealRestore, res.Live.Reason)
}

// startEtcd34 is startSource with the etcd v3.4.34 a shoot runs by default, checked to be that.
func startEtcd34(t *testing.T, dir string) *source {
	t.Helper()
	binDir, err := stack.Etcd34Dir()
	if err != nil {
		t.Fatal(err)
	}
	src := startSource(t, binDir, dir)
	if st, err := src.client.Status(context.Background(), src.member.ClientURL); err != nil || st.Version != "3.4.34" {
		t.Fatalf("the source etcd's status %+v, %v: want version 3.4.34", st, err)
	}
	return src
}
