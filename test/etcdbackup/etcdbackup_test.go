// Package etcdbackup_test drives EtcdBackupConfig end to end: real etcd, kube-apiserver,
// nats-server with a cron schedule, the bridge and the schedule and snapshot functions, and a
// backup restored into a fresh etcd.
package etcdbackup_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// Backups come every second and the oldest beyond keep 3 go; the newest one, restored with
// etcdutl's snapshot restore into a fresh etcd (v3.6), holds every key the source etcd had
// when it was taken.
func TestBackupRotateRestore(t *testing.T) {
	p := pipeline.Start(t)
	c := p.Client
	ctx := context.Background()
	root, store, etcd, logs := startBackups(t, p)
	want := map[string]string{}
	for i := range 300 {
		k, v := fmt.Sprintf("/registry/pods/team/pod-%03d", i), fmt.Sprintf(`{"spec":{"n":%d}}`, i)
		if _, err := etcd.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}

	cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
			Schedule: "* * * * * *", Keep: 3, Destination: "local"}}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Backups keep coming; the first ones go once three newer ones are there.
	var first string
	live := &backupv1alpha1.EtcdBackupConfig{}
	p.Eventually(45*time.Second, "three kept, the first one rotated out", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), live); err != nil {
			return false, err.Error()
		}
		if first == "" && live.Status.LastBackup != nil {
			first = live.Status.LastBackup.Key
		}
		keys := listKeys(t, store, "team/main/")
		return first != "" && len(keys) == 3 && !slices.Contains(keys, first) && live.Status.BackupCount == 3,
			fmt.Sprintf("first %s, store %q, status %d kept", first, keys, live.Status.BackupCount)
	})
	if err := c.Delete(ctx, live); err != nil { // no more fires while the backup is restored
		t.Fatal(err)
	}
	newest := live.Status.Backups[0].Key
	if live.Status.LastBackup.Key > newest {
		newest = live.Status.LastBackup.Key
	}

	cp, err := stack.ControlPlaneDir()
	if err != nil {
		t.Fatal(err)
	}
	fresh := &stack.EtcdBR{BinDir: cp, Logs: logs} // etcd v3.6
	restored, err := stack.NewEtcdMember("restored", filepath.Join(t.TempDir(), "restored"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := snapshot.NewV3(zaptest.NewLogger(t)).Restore(snapshot.RestoreConfig{
		SnapshotPath:        filepath.Join(root, "etcd-backups", newest),
		Name:                restored.Name,
		OutputDataDir:       restored.DataDir,
		PeerURLs:            []string{restored.PeerURL},
		InitialCluster:      restored.Name + "=" + restored.PeerURL,
		InitialClusterToken: "etcd-cluster",
	}); err != nil {
		t.Fatalf("restoring %s (hash checked): %v", newest, err)
	}
	t.Logf("restored %s in %s", newest, time.Since(start).Round(time.Millisecond))
	etcd2, err := fresh.StartEtcd(restored)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd2.Stop()
	got, err := etcd2.Get(ctx, "/registry/")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("restored etcd holds %d keys, want the %d written before the backups", len(got), len(want))
	}
}

// startBackups runs the schedule and snapshot functions on p, with the namespaces garden and
// team, the BackupDestination "local" (bucket etcd-backups under root) and a source etcd (v3.5,
// as Gardener's shoots run it) logging to logs.
func startBackups(t *testing.T, p *pipeline.Pipeline) (root string, store objectstore.Store, etcd *stack.Etcd, logs *os.File) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"garden", "team"} {
		if err := p.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	root = t.TempDir()
	providers := objectstore.NewRegistry(local.New(root))
	store, err := providers["local"].Open("etcd-backups", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Client.Create(ctx, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: "local", Bucket: "etcd-backups"}}); err != nil {
		t.Fatal(err)
	}
	p.RunFunction(etcdbackup.ScheduleDefinition, providers)
	p.RunFunction(etcdbackup.SnapshotDefinition, providers)

	logs, err = os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	source, err := stack.NewEtcdBR(logs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stack.NewEtcdMember("source", filepath.Join(t.TempDir(), "source"))
	if err != nil {
		t.Fatal(err)
	}
	if etcd, err = source.StartEtcd(m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	return root, store, etcd, logs
}

func listKeys(t *testing.T, s objectstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.List(context.Background(), prefix, func(page []string) error { keys = append(keys, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}
