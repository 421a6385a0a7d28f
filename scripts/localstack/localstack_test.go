package localstack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// make run reaches its goal with no manual step: every example Succeeded, the deleted entry
// purged after its retention, every live entry's backups and the example config's restored by a drill, no dead letters; on an embedded nats-server (make run) and on a
// cluster of three (make run NATS_NODES=3).
func TestLocalStackRunsTheExamplesToCompletion(t *testing.T) {
	t.Run("embedded nats-server", func(t *testing.T) { runsTheExamples(t, 0) })
	t.Run("three nats-servers", func(t *testing.T) { runsTheExamples(t, 3) })
}

func runsTheExamples(t *testing.T, natsNodes int) {
	dir := t.TempDir()
	out := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := Run(ctx, Options{Dir: dir, ExitWhenDone: true, NATSNodes: natsNodes, Out: out, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	text := out.String()
	if natsNodes > 0 && !strings.Contains(text, fmt.Sprintf("starting %d nats-server processes", natsNodes)) {
		t.Fatalf("the stack did not start %d nats-server processes:\n%s", natsNodes, text)
	}
	if !strings.Contains(text, Done) {
		t.Fatalf("output does not reach %q:\n%s", Done, text)
	}
	last := text[strings.LastIndex(text, "housekeeper local stack"):]
	for _, want := range []string{"example-azure", "example-local", "example-s3", "example-gcs", "shoot--dev--alpha--5d1c9e2a", "shoot--dev--beta--7f3b0c44", "shoot--dev--delta--3c8e5b17", "shoot--dev--epsilon--5d9f0c28", "DEAD LETTERS (unresolved): 0",
		"etcd-backups/main  */20 * * * * *"} { // infra/examples/30-etcd-backup.yaml, applied with its etcd's address
		if !strings.Contains(last, want) {
			t.Errorf("final status lacks %q:\n%s", want, last)
		}
	}
	// The table shows each live entry's snapshots, full and delta.
	for _, name := range []string{"shoot--dev--alpha--5d1c9e2a", "shoot--dev--beta--7f3b0c44", "shoot--dev--delta--3c8e5b17", "shoot--dev--epsilon--5d9f0c28"} {
		m := regexp.MustCompile(name + `.*\b\d+ \((\d+) full, (\d+) delta\)`).FindStringSubmatch(last)
		if m == nil || m[1] == "0" || m[2] == "0" {
			t.Errorf("final status shows no full and delta snapshots of %s: %v\n%s", name, m, last)
		}
	}
	// The example RestoreDrill restored every live shoot's backups, to a revision.
	if !strings.Contains(last, "RESTORE DRILLS") {
		t.Errorf("final status shows no restore drills:\n%s", last)
	}
	for _, name := range []string{"shoot--dev--alpha--5d1c9e2a", "shoot--dev--beta--7f3b0c44", "shoot--dev--delta--3c8e5b17", "shoot--dev--epsilon--5d9f0c28"} {
		if !regexp.MustCompile(name + `\s+Restorable\s+\S+\s+revision [1-9]\d*, `).MatchString(last) {
			t.Errorf("final status shows no restorable drill of %s:\n%s", name, last)
		}
	}
	// And the example EtcdBackupConfig's newest backup, the snapshot function's, which the
	// config's running etcd holds at its revision.
	if !regexp.MustCompile(`etcd-backups/main\s+Exact\s+\S+\s+revision [1-9]\d*, `).MatchString(last) {
		t.Errorf("final status shows no exact drill of etcd-backups/main:\n%s", last)
	}
	// The example BackupCopyPolicy copied the live Azure entry's snapshots to the second store.
	// (Its last run may predate the deleted entry's deletion and list it too.)
	if !regexp.MustCompile(`(?m)^\s+second-copy → example-local\s.*\d entries: 0 failed`).MatchString(last) ||
		!regexp.MustCompile(`shoot--dev--alpha--5d1c9e2a\s+complete\s+\d+ objects, .*newest (Full|Incr)-`).MatchString(last) {
		t.Errorf("final status shows no complete copy of shoot--dev--alpha--5d1c9e2a:\n%s", last)
	}
	// Listed as a BackupEntry, that is: a drill's last run may have restored it before it went.
	if regexp.MustCompile(`(?m)^\s*BackupEntry\s+shoot--dev--gamma--2a9e61d0\s`).MatchString(last) {
		t.Errorf("the deleted entry is still listed:\n%s", last)
	}
	if !strings.Contains(text, "SCHEDULED PURGES") || !strings.Contains(text, "shoot--dev--gamma--2a9e61d0  due") {
		t.Errorf("the scheduled purge was never shown:\n%s", text)
	}
	// The local bucket still holds the live entry's snapshots, real ones from
	// etcd-backup-restore, written with its umask (files 0600).
	beta, _ := filepath.Glob(filepath.Join(dir, "buckets", "example-local", "shoot--dev--beta--7f3b0c44", "etcd-main", "v2", "*"))
	var full, delta int
	for _, f := range beta {
		switch name := filepath.Base(f); {
		case strings.HasPrefix(name, "Full-"):
			full++
		case strings.HasPrefix(name, "Incr-"):
			delta++
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("snapshot %s: %v, want mode 0600", f, fi)
		}
	}
	if full == 0 || delta == 0 {
		t.Errorf("%d full and %d delta snapshots under the live local entry, want both: %v", full, delta, beta)
	}
	if !strings.Contains(text, "stopped the etcd of shoot--dev--gamma--2a9e61d0") {
		t.Errorf("the deleted shoot's etcd was never stopped:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubeconfig")); err != nil {
		t.Errorf("kubeconfig not written: %v", err)
	}
}
