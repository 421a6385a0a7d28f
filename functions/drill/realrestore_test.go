package drill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

// fakeEtcdbrctl writes a shell script that answers --version as etcdbrctl v0.44.1 does and
// runs restore as body says.
func fakeEtcdbrctl(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "etcdbrctl")
	script := `#!/bin/sh
if [ "$1" = "--version" ]; then
  echo 'time="2026-11-29T10:00:00Z" level=info msg="etcd-backup-restore Version: v0.44.1"'
  echo 'time="2026-11-29T10:00:00Z" level=info msg="Git SHA: v0.44.1"'
  exit 0
fi
` + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// The real restore beside the drill's replay, where etcdbrctl is not configured, fails, is
// killed, or leaves nothing: the replay's result stands only with a verdict on the real
// restore, and its failures name its exit and its last words, never a credential.
func TestDrillRealRestoreOutcomes(t *testing.T) {
	b := backUp(t)
	ctx := context.Background()
	prefix := strings.TrimSuffix(b.prefix, "v2/")
	const secret = "s3cr3t-access-key-value"
	store, err := NewEtcdbrStore(objectstore.Where{Type: local.Type, Bucket: filepath.Base(b.bucket)},
		map[string][]byte{"secretAccessKey": []byte(secret)}, prefix, objectstore.NewRegistry(local.New(filepath.Dir(b.bucket))))
	if err != nil {
		t.Fatal(err)
	}
	if store.Provider != "Local" || store.Prefix != "shoot--drill--test/etcd-main" || store.Home != filepath.Dir(b.bucket) {
		t.Fatalf("etcdbrctl's store %+v", store)
	}
	run := func(t *testing.T, e *Etcdbrctl) (Result, backupv1alpha1.EntryDrillResult, error) {
		t.Helper()
		res, err := Run(ctx, localDir(t, b.bucket), prefix, Options{WorkDir: t.TempDir(), Etcdbrctl: e, EtcdbrStore: store})
		return res, Report("shoot--drill--test", time.Now(), res, err), err
	}
	fake := func(t *testing.T, body string) *Etcdbrctl {
		t.Helper()
		e, err := NewEtcdbrctl(ctx, fakeEtcdbrctl(t, body))
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != "v0.44.1" || e.Tool() != "etcd-backup-restore v0.44.1" {
			t.Fatalf("version %q, tool %q", e.Version, e.Tool())
		}
		return e
	}

	t.Run("not configured", func(t *testing.T) {
		res, r, err := run(t, nil)
		if err != nil || res.Revision != b.revision {
			t.Fatalf("drill: revision %d, %v; want %d", res.Revision, err, b.revision)
		}
		if res.RealRestore == nil || res.RealRestore.Outcome != RealRestoreNotRun {
			t.Errorf("real restore %+v, want NotRun", res.RealRestore)
		}
		if r.Outcome != backupv1alpha1.OutcomeRestorable || r.RealRestore != "etcd-backup-restore's restore not run: no etcdbrctl configured" {
			t.Errorf("report %s, real restore %q", r.Outcome, r.RealRestore)
		}
	})
	t.Run("fails", func(t *testing.T) {
		// As etcdbrctl fails (logrus's Fatalf), its environment echoed as a careless tool might.
		e := fake(t, `for a in "$@"; do echo "time=\"x\" level=info msg=\"flag $a\"" >&2; done
echo "time=\"x\" level=error msg=\"listing with key $(cat ../etcdbr-credentials/secretAccessKey) took 2 attempts\"" >&2
echo 'time="2026-11-29T10:00:01Z" level=fatal msg="Failed to restore snapshot: snapshot revision verification failed for delta snapshot Incr-1-2-3.gz : mismatched event revision while applying delta snapshot, expected 41 but applied 42 "' >&2
exit 1`)
		res, r, err := run(t, e)
		if !errors.Is(err, ErrRealRestoreFailed) {
			t.Fatalf("drill: %v, want ErrRealRestoreFailed", err)
		}
		if res.Revision != b.revision || res.RealRestore.Outcome != RealRestoreFails {
			t.Errorf("revision %d, real restore %+v; want the replay's %d and Fails", res.Revision, res.RealRestore, b.revision)
		}
		for _, want := range []string{"the real restore fails: etcd-backup-restore v0.44.1 fails to restore the backups the drill restored (exit code 1)",
			"fatal: Failed to restore snapshot: snapshot revision verification failed", "expected 41 but applied 42"} {
			if !strings.Contains(r.Reason, want) {
				t.Errorf("reason %q lacks %q", r.Reason, want)
			}
		}
		if r.Outcome != backupv1alpha1.OutcomeNotRestorable || strings.Contains(r.Reason, secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("report %s, reason %q: want NotRestorable and no credential", r.Outcome, r.Reason)
		}
		if !strings.Contains(r.Reason, "[redacted]") {
			t.Errorf("reason %q: the credential the script printed is not redacted", r.Reason)
		}
	})
	t.Run("killed", func(t *testing.T) {
		e := fake(t, `echo 'time="x" level=info msg="Applying delta snapshots..."' >&2; kill -KILL $$`)
		res, r, err := run(t, e)
		if !errors.Is(err, ErrDrill) || res.RealRestore.Outcome != RealRestoreNotCompared {
			t.Fatalf("drill: %v, real restore %+v; want ErrDrill, NotCompared", err, res.RealRestore)
		}
		if r.Outcome != backupv1alpha1.OutcomeError || !strings.Contains(r.Reason, "etcd-backup-restore v0.44.1's restore was killed by killed") {
			t.Errorf("report %s, reason %q; want Error, killed", r.Outcome, r.Reason)
		}
	})
	t.Run("restores nothing", func(t *testing.T) {
		e := fake(t, `exit 0`)
		_, r, err := run(t, e)
		if !errors.Is(err, ErrRealRestoreFailed) || r.Outcome != backupv1alpha1.OutcomeNotRestorable ||
			!strings.Contains(r.Reason, "etcd-backup-restore v0.44.1's restored db does not open") {
			t.Errorf("drill: %v; report %s %q; want NotRestorable: its db does not open", err, r.Outcome, r.Reason)
		}
	})
	t.Run("not etcdbrctl", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "true")
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := NewEtcdbrctl(ctx, path); err == nil || !strings.Contains(err.Error(), "does not say an etcd-backup-restore version") {
			t.Errorf("NewEtcdbrctl of a script that is not etcdbrctl: %v", err)
		}
		if _, err := NewEtcdbrctl(ctx, filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Error("NewEtcdbrctl of a missing file: no error")
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 18250: "18,250", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
