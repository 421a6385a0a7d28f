package etcdbr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// `housekeeper drill --entry --keep DIR` on a real etcd's backups, taken by the pinned
// etcdbrctl, keeps exactly the full snapshot and the deltas the drill proved, as stored, under
// DIR/<bucket>/<entry>/etcd-main/v2 with the result beside them, and prints the
// --backup-data-path; `etcdbrctl initialize` run as gardenadm restore's init container runs it
// (its arguments, store and etcd config from gardenadm's own code, with that path) restores
// every key written, and etcd serves them. A DIR that holds the set already is refused and left
// as it was; a drill of a delta with a byte flipped (its checksum as it was) keeps nothing.
func TestDrillKeepsASetGardenadmRestores(t *testing.T) {
	ctx := context.Background()
	const prefix = "/registry/configmaps/kept/"
	written := map[string]string{}
	put := func(c *clientv3.Client, from, n int) int64 {
		var rev int64
		for i := from; i < from+n; i++ {
			key, value := fmt.Sprintf("%scm-%03d", prefix, i), fmt.Sprintf("value %d", i)
			resp, err := c.Put(ctx, key, value)
			if err != nil {
				t.Fatal(err)
			}
			written[key], rev = value, resp.Header.Revision
		}
		return rev
	}
	b := backUpForRealRestore(t,
		func(c *clientv3.Client) int64 { return put(c, 0, 20) },
		func(c *clientv3.Client) int64 {
			rev := put(c, 20, 10)
			resp, err := c.Delete(ctx, prefix+"cm-003")
			if err != nil {
				t.Fatal(err)
			}
			delete(written, prefix+"cm-003")
			return max(rev, resp.Header.Revision)
		},
		func(c *clientv3.Client) int64 { return put(c, 30, 5) })
	entryName, _, _ := strings.Cut(b.store.Prefix, "/") // shoot--drill--real
	run := drillCommand(t, b, entryName)

	keep := filepath.Join(t.TempDir(), "keep")
	code, out := run("--keep", keep)
	dataPath := filepath.Join(keep, b.store.Container, entryName, "etcd-main", "v2")
	if want := "restore with   gardenadm restore --backup-data-path " + dataPath + "\n"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("drill --keep: exit %d, output:\n%s\nwant 0 and %q", code, out, want)
	}
	t.Logf("housekeeper drill --keep:\n%s", out)

	// The drill's result beside the set, naming what it kept.
	var report struct {
		Outcome string       `json:"outcome"`
		Result  drill.Result `json:"result"`
		Kept    *drill.Kept  `json:"kept"`
	}
	data, err := os.ReadFile(filepath.Join(keep, entryName+".drill.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatal(err)
	}
	chain := append([]string{report.Result.Full}, report.Result.Deltas...)
	if report.Outcome != backupv1alpha1.OutcomeRestorable || report.Kept == nil || report.Kept.BackupDataPath != dataPath || len(report.Result.Deltas) < 2 {
		t.Fatalf("the kept result: outcome %s, %d deltas, kept %+v; want Restorable, 2 deltas at least, kept at %s", report.Outcome, len(report.Result.Deltas), report.Kept, dataPath)
	}
	// Every snapshot in the bucket is the chain here: the snapshotter ran once.
	if snaps := keysUnder(t, b.bucket, b.store.SnapshotPrefix()); !slices.Equal(sorted(snaps), sorted(chain)) {
		t.Fatalf("the drill proved %v, the bucket holds %v", chain, snaps)
	}
	// Exactly the chain, byte for byte as stored; files 0600, directories 0700.
	var files []string
	if err := filepath.WalkDir(filepath.Join(keep, b.store.Container), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if want := fs.FileMode(0o600); d.IsDir() {
			want = fs.ModeDir | 0o700
			if info.Mode() != want {
				t.Errorf("%s: mode %s, want %s", p, info.Mode(), want)
			}
			return nil
		} else if info.Mode() != want {
			t.Errorf("%s: mode %s, want %s", p, info.Mode(), want)
		}
		rel, _ := filepath.Rel(filepath.Join(keep, b.store.Container), p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(files), sorted(chain)) {
		t.Errorf("kept %v, want the chain the drill proved: %v", files, chain)
	}
	for i, key := range chain {
		kept, err := os.ReadFile(filepath.Join(keep, b.store.Container, filepath.FromSlash(key)))
		if err != nil {
			t.Error(err)
			continue
		}
		stored, err := os.ReadFile(filepath.Join(b.store.Home, b.store.Container, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kept, stored) {
			t.Errorf("kept %s: %d bytes, not the %d stored", key, len(kept), len(stored))
		}
		if i >= len(report.Kept.Objects) {
			t.Errorf("the result names %d kept objects, want %d", len(report.Kept.Objects), len(chain))
		} else if o := report.Kept.Objects[i]; o.Key != key || o.Size != int64(len(stored)) {
			t.Errorf("the result names kept object %d %+v, want %s of %d bytes", i, o, key, len(stored))
		}
	}

	// gardenadm restore --backup-data-path <the printed path>: its init container's
	// `etcdbrctl initialize` with its host paths here: the backup buckets root is the Local
	// provider's $HOME (mounted at /root, root's home), its etcd config in ETCD_CONF (mounted at
	// etcd-backup-restore's default path), data and restoration temp directories the test's.
	root, args := gardenadmInitialize(t, dataPath)
	if root != keep {
		t.Fatalf("gardenadm's backup buckets root is %s, want the keep directory %s", root, keep)
	}
	dir := t.TempDir()
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "data", "new.etcd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(member.DataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "etcd.conf.yaml")
	if err := os.WriteFile(conf, []byte(gardenadmEtcdConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		switch name, _, _ := strings.Cut(a, "="); name {
		case "--data-dir":
			args[i] = name + "=" + member.DataDir
		case "--restoration-temp-snapshots-dir":
			args[i] = name + "=" + filepath.Join(dir, "restorationtmp")
		}
	}
	if !slices.Contains(args, "--store-container="+b.store.Container) || !slices.Contains(args, "--store-prefix="+entryName+"/etcd-main") {
		t.Fatalf("gardenadm runs etcdbrctl %v, want the store %s, prefix %s/etcd-main", args, b.store.Container, entryName)
	}
	env := []string{"HOME=" + root, "ETCD_CONF=" + conf, "POD_NAME=etcd-bootstrap-main", "POD_NAMESPACE=kube-system"}
	initCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := b.etcdbr.Initialize(initCtx, args[1:], env); err != nil {
		t.Fatalf("etcdbrctl initialize %v: %v", args, err)
	}
	restored, err := b.etcdbr.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	got, err := restored.Get(ctx, prefix)
	restored.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, written) {
		t.Errorf("etcd on the data etcdbrctl initialize restored from the kept set holds %d keys, want the %d written:\n%v\nwant %v", len(got), len(written), got, written)
	}

	// The set is there: a second keep into the same directory is refused and leaves it be.
	before := treeOf(t, keep)
	if code, out := run("--keep", keep); code == 0 || !strings.Contains(out, "holds a set for "+entryName+" already") {
		t.Errorf("drill --keep into a directory with the set: exit %d, output:\n%s\nwant an error saying it holds a set", code, out)
	}
	if after := treeOf(t, keep); !maps.Equal(after, before) {
		t.Errorf("a refused keep changed the keep directory: %v, was %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}

	// A delta with a byte flipped, its checksum as it was: not restorable, nothing kept.
	flipByte(t, b.bucket, b.deltas[len(b.deltas)-1])
	failed := filepath.Join(t.TempDir(), "keep")
	code, out = run("--keep", failed)
	if code != 1 || !strings.Contains(out, "NOT RESTORABLE") || !strings.Contains(out, "nothing kept") {
		t.Errorf("drill --keep of a flipped delta: exit %d, output:\n%s\nwant 1, NOT RESTORABLE, nothing kept", code, out)
	}
	if tree := treeOf(t, failed); len(tree) != 0 {
		t.Errorf("a drill that failed left %v in the keep directory, want nothing", slices.Sorted(maps.Keys(tree)))
	}
}

// gardenadmInitialize is what gardenadm restore (gardener v1.150,
// pkg/component/etcd/bootstrap/backuprestore: ConfigFromBackupDataPath, InitContainer) makes of
// --backup-data-path: the host directory it mounts as the Local provider's root, and its init
// container's etcdbrctl arguments, their paths inside the container. (The package itself
// imports more of gardener than this module's go.sum holds.)
func gardenadmInitialize(t *testing.T, backupDataPath string) (root string, args []string) {
	t.Helper()
	etcdMainDir := filepath.Dir(backupDataPath)
	entryDir := filepath.Dir(etcdMainDir)
	bucketDir := filepath.Dir(entryDir)
	root = filepath.Dir(bucketDir)
	if filepath.Base(backupDataPath) != "v2" || filepath.Base(etcdMainDir) != "etcd-main" {
		t.Fatalf("--backup-data-path %s is not <backupBucketsRoot>/<bucketName>/<namespace>--<uid>/etcd-main/v2", backupDataPath)
	}
	return root, []string{"initialize",
		"--storage-provider=Local",
		"--store-container=" + filepath.Base(bucketDir),
		"--store-prefix=" + filepath.Join(filepath.Base(entryDir), "etcd-main"),
		"--data-dir=<etcd-main's data volume>/new.etcd",
		"--restoration-temp-snapshots-dir=/tmp/restorationtmp",
	}
}

// gardenadmEtcdConfig is the membership of the etcd config gardenadm gives its init container
// (EtcdInitializeConfig): one member, so etcdbrctl initialize restores as a single member.
const gardenadmEtcdConfig = `name: etcd-config
initial-advertise-peer-urls:
  etcd-bootstrap-main:
  - http://localhost:2380
initial-cluster: etcd-bootstrap-main=http://localhost:2380
initial-cluster-state: new
initial-cluster-token: etcd-cluster
`

// drillCommand makes b's backups a BackupEntry's, entryName's in the bucket b.store.Container
// (local), in a Kubernetes API server of the test's, and returns `housekeeper drill --entry
// entryName` with args, as an operator runs it, its exit code and output.
func drillCommand(t *testing.T, b realRestoreBackup, entryName string) func(args ...string) (int, string) {
	t.Helper()
	ctx := context.Background()
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ref := corev1.SecretReference{Namespace: "garden", Name: "credentials"}
	for _, err := range []error{
		c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}),
		c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "credentials"}}),
		c.Create(ctx, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: b.store.Container}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local", SecretRef: ref}}),
		c.Create(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName}, Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: b.store.Container, Region: "local", SecretRef: ref}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, append([]string{"drill", "--entry", entryName, "--kubeconfig", kubeconfig, "--local-root", b.store.Home, "--work-dir", t.TempDir()}, args...),
			&out, &errOut, local.Plugin)
		return code, out.String() + errOut.String()
	}
}

// treeOf is every file and directory under dir (missing: none), with its content.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			tree[rel+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(p)
		tree[rel] = string(data)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return tree
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
