package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// `housekeeper drill --config` restores the newest backup the snapshot function took of a real
// etcd for an EtcdBackupConfig, to that etcd's revision; once that backup is cut short it exits
// 1 naming it, in text and in JSON. Usage mistakes exit 2.
func TestDrillCommandDrillsAConfig(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	etcd := testenv.StartEtcd(t, 25)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := &backupv1alpha1.EtcdBackupConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
			Schedule: "@daily", Keep: 2, Destination: "local"},
	}
	for _, err := range []error{
		c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}),
		c.Create(ctx, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "local"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: "backups"}}),
		c.Create(ctx, cfg),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	revision, err := etcd.Put(ctx, "/registry/last", "written before the backup")
	if err != nil {
		t.Fatal(err)
	}
	snap := &etcdbackup.Snapshotter{Client: c, Providers: objectstore.NewRegistry(local.New(root)), Log: zaptest.NewLogger(t), Now: time.Now}
	fire := runner.Fire{At: time.Now().UTC().Truncate(time.Second)}
	e, err := events.NewEtcdBackupDueEvent("test", kube.Ref(events.KindEtcdBackupConfig, cfg), cfg.Spec.Schedule, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Handle(runner.WithFire(ctx, fire), e); err != nil {
		t.Fatal(err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, append([]string{"drill", "--kubeconfig", kubeconfig, "--local-root", root}, args...), &out, &errOut, local.Plugin)
		return code, out.String() + errOut.String()
	}
	code, out := run("--config", "team/main")
	// The config's etcd runs on: the drill compares with it.
	if want := fmt.Sprintf("revision %d ", revision); code != 0 || !strings.Contains(out, "drill of EtcdBackupConfig team/main, bucket backups, prefix team/main/: exact\n") ||
		!strings.Contains(out, want) || !strings.Contains(out, "\n  live etcd      Matches: the live etcd's HashKV at revision ") ||
		!strings.Contains(out, "\n  behind live    0 revisions, ") {
		t.Errorf("drill --config team/main: exit %d, output:\n%s\nwant 0, exact, %q, the live etcd matching, 0 revisions behind", code, out, want)
	}
	// etcd-backup-restore does not read the snapshot function's backups: with or without
	// etcdbrctl, the drill says its restore does not apply, and why.
	const notApplicable = "  real restore   etcd-backup-restore's restore does not apply: the snapshot function's backups are not in etcd-backup-restore's layout\n"
	if !strings.Contains(out, notApplicable) {
		t.Errorf("drill --config team/main without --etcdbrctl: output:\n%s\nwant %q", out, notApplicable)
	}
	etcdbrctl := filepath.Join(t.TempDir(), "etcdbrctl")
	if err := os.WriteFile(etcdbrctl, []byte("#!/bin/sh\necho 'level=info msg=\"etcd-backup-restore Version: v0.44.1\"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out = run("--config", "team/main", "--etcdbrctl", etcdbrctl)
	if code != 0 || !strings.Contains(out, notApplicable) || !strings.Contains(out, ": exact\n") {
		t.Errorf("drill --config team/main --etcdbrctl: exit %d, output:\n%s\nwant 0, exact and %q", code, out, notApplicable)
	}
	if code, out = run("--config", "team/main", "--etcdbrctl", filepath.Join(t.TempDir(), "missing")); code != 2 || !strings.Contains(out, "--etcdbrctl") {
		t.Errorf("drill --etcdbrctl of a missing file: exit %d, output:\n%s\nwant 2 (usage), naming --etcdbrctl", code, out)
	}

	key := destination.ConfigKey(cfg, fire.At)
	path := filepath.Join(root, "backups", filepath.FromSlash(key))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, info.Size()-100); err != nil {
		t.Fatal(err)
	}
	code, out = run("--config", "team/main", "--output", "json")
	var report struct {
		Config     string `json:"config"`
		Entry      string `json:"entry"`
		Restorable bool   `json:"restorable"`
		Error      string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil {
		t.Fatalf("drill --output json printed no report: %v\n%s", err, out)
	}
	if code != 1 || report.Config != "team/main" || report.Entry != "" || report.Restorable || !strings.Contains(report.Error, key) {
		t.Errorf("drill of a cut backup: exit %d, report %+v, want 1, config team/main, not restorable, naming %s:\n%s", code, report, key, out)
	}

	for _, args := range [][]string{
		{"--config", "main"},
		{"--config", "team/main", "--entry", "shoot--team--main"},
		{},
	} {
		if code, out := run(args...); code != 2 {
			t.Errorf("drill %v: exit %d, want 2 (usage):\n%s", args, code, out)
		}
	}
}

// `housekeeper drill --entry NAME --copy-policy POLICY` drills the copy the policy keeps of the
// entry's backups (etcd-backup-restore's, copied by replica.Copy as the copy function copies
// them) in its destination, and says so; a policy that does not copy the entry is an error
// naming it; --copy-policy without --entry is a usage mistake.
func TestDrillCommandDrillsACopy(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	const entryName = "shoot--team--copied--0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a12"
	root := t.TempDir()
	testenv.BackUpEtcd(t, t.TempDir(), root, "first", entryName+"/etcd-main")
	if err := os.MkdirAll(filepath.Join(root, "second"), 0o700); err != nil {
		t.Fatal(err)
	}
	src, err := local.New(root).Open("first", nil)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := local.New(root).Open("second", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Copy(ctx, src, dst, entryName+"/"); err != nil {
		t.Fatal(err)
	}
	ref := corev1.SecretReference{Namespace: "garden", Name: "credentials"}
	for _, err := range []error{
		c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}),
		c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "credentials"}}),
		c.Create(ctx, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "first"}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local", SecretRef: ref}}),
		c.Create(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName}, Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: "first", Region: "local", SecretRef: ref}}),
		c.Create(ctx, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "second"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: "second"}}),
		c.Create(ctx, &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Names: []string{"first"}}, Destination: "second", Schedule: "@hourly"}}),
		c.Create(ctx, &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "other-buckets"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Names: []string{"other"}}, Destination: "second", Schedule: "@hourly"}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, append([]string{"drill", "--kubeconfig", kubeconfig, "--local-root", root}, args...), &out, &errOut, local.Plugin)
		return code, out.String() + errOut.String()
	}
	code, out := run("--entry", entryName, "--copy-policy", "second-copy")
	if want := "drill of BackupEntry " + entryName + ", copy/second-copy, bucket second, prefix " + entryName + "/etcd-main/: restorable\n"; code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("drill --copy-policy second-copy: exit %d, output:\n%s\nwant 0 and %q", code, out, want)
	}
	code, out = run("--entry", entryName, "--copy-policy", "second-copy", "--output", "json")
	var report struct {
		Source, Bucket string
		Restorable     bool
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil {
		t.Fatalf("drill --output json printed no report: %v\n%s", err, out)
	}
	if code != 0 || report.Source != "copy/second-copy" || report.Bucket != "second" || !report.Restorable {
		t.Errorf("drill --copy-policy --output json: exit %d, %+v; want 0, source copy/second-copy, bucket second, restorable", code, report)
	}
	// --keep keeps the copy's set as it keeps the bucket's, under the destination's bucket.
	keep := filepath.Join(t.TempDir(), "keep")
	code, out = run("--entry", entryName, "--copy-policy", "second-copy", "--keep", keep)
	dataPath := filepath.Join(keep, "second", entryName, "etcd-main", "v2")
	if want := "  restore with   gardenadm restore --backup-data-path " + dataPath + "\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("drill --copy-policy --keep: exit %d, output:\n%s\nwant 0 and %q", code, out, want)
	}
	kept, err := os.ReadDir(dataPath)
	if err != nil || len(kept) == 0 {
		t.Errorf("drill --copy-policy --keep kept %v in %s (%v), want the snapshots", kept, dataPath, err)
	}
	if _, err := os.Stat(filepath.Join(keep, entryName+".drill.json")); err != nil {
		t.Errorf("drill --copy-policy --keep wrote no result beside the set: %v", err)
	}
	code, out = run("--entry", entryName, "--copy-policy", "other-buckets")
	if want := "no copy of the entry: BackupCopyPolicy other-buckets does not copy BackupEntry " + entryName; code != 1 || !strings.Contains(out, want) {
		t.Errorf("drill --copy-policy other-buckets: exit %d, output:\n%s\nwant 1 and %q", code, out, want)
	}
	if code, out := run("--config", "team/main", "--copy-policy", "second-copy"); code != 2 || !strings.Contains(out, "--copy-policy") {
		t.Errorf("drill --config --copy-policy: exit %d, want 2 (usage) naming --copy-policy:\n%s", code, out)
	}
}

// --keep keeps an entry's etcd-main, which gardenadm restores: with --config or another
// --etcd it is a usage mistake, found before anything is read. drill --help shows it.
func TestDrillKeepUsage(t *testing.T) {
	var help, helpErr bytes.Buffer
	if code := Main(context.Background(), []string{"drill", "--help"}, &help, &helpErr); code != 0 ||
		!strings.Contains(help.String(), "  -keep ") || !strings.Contains(help.String(), "gardenadm restore") {
		t.Errorf("drill --help: exit %d, it does not show --keep and gardenadm restore:\n%s%s", code, help.String(), helpErr.String())
	}
	for _, args := range [][]string{
		{"--config", "team/main", "--keep", t.TempDir()},
		{"--entry", "shoot--team--a--0b6f5a1e", "--etcd", "etcd-events", "--keep", t.TempDir()},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"drill"}, args...), &out, &errOut, local.Plugin)
		if code != 2 || !strings.Contains(errOut.String(), "--keep") {
			t.Errorf("drill %v: exit %d, output:\n%s%s\nwant 2 (usage) naming --keep", args, code, out.String(), errOut.String())
		}
	}
}
