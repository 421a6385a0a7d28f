package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// BackUpEtcd runs an etcd with a few keys and etcd-backup-restore's snapshotter (the pinned
// etcdbrctl) saving to the local provider's bucket root/bucket under prefix until it has taken
// a full snapshot and a delta, as etcd-druid backs up a shoot's etcd-main; both are stopped
// when it returns. Their output goes to a log of its own in logDir: each backup has its own.
func BackUpEtcd(t testing.TB, logDir, root, bucket, prefix string) {
	t.Helper()
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.CreateTemp(logDir, "etcdbr-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	br := &stack.EtcdBR{BinDir: binDir, Logs: logs}
	dir := t.TempDir()
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := br.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	ctx := context.Background()
	put := func(i int) {
		t.Helper()
		if _, err := etcd.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), "{}"); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	store := &stack.BackupStore{Provider: "Local", Container: bucket, Prefix: prefix, Home: root}
	snapshotter, err := br.StartSnapshotter(etcd, store, stack.SnapshotOptions{
		FullSnapshotSchedule: "0 0 * * *", // only the one taken at start
		DeltaSnapshotPeriod:  time.Second,
		MaxBackups:           7,
		TempDir:              filepath.Join(dir, "snapshotter"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer snapshotter.Stop()
	snapshots := filepath.Join(root, bucket, filepath.FromSlash(store.SnapshotPrefix()))
	taken := func(kind string) func() (bool, string) {
		return func() (bool, string) {
			names, _ := filepath.Glob(filepath.Join(snapshots, kind+"-*"))
			return len(names) > 0, fmt.Sprint(names)
		}
	}
	Eventually(t, time.Minute, "a full snapshot", taken("Full"))
	put(1)
	Eventually(t, time.Minute, "a delta snapshot", taken("Incr"))
}

// StartEtcd runs a real etcd (the v3.5 release make tools builds) with keys keys in it
// (/registry/key-0000: value-0, ...), stopped when the test ends.
func StartEtcd(t testing.TB, keys int) *stack.Etcd {
	t.Helper()
	logs, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	br, err := stack.NewEtcdBR(logs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stack.NewEtcdMember("backup-test", filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := br.StartEtcd(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	for i := range keys {
		if _, err := etcd.Put(context.Background(), fmt.Sprintf("/registry/key-%04d", i), fmt.Sprintf("value-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return etcd
}
