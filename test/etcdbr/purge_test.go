package etcdbr_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// purgeHelperEnv carries the purge process's arguments to TestHelperPurgeProcess.
const purgeHelperEnv = "HOUSEKEEPER_TEST_ETCDBR_PURGE"

// startPurgeProcess runs `housekeeper function purge` as the purge Deployment runs it
// (infra/keda/purge.yaml: runAsUser and runAsGroup 65532), in a copy of this test binary
// that uid 65532 can execute, until the test ends.
func (f *fixture) startPurgeProcess(t *testing.T) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(f.dir, "bin", "etcdbr.test")
	copyFile(t, self, bin, 0o755)
	kubeconfig := filepath.Join(f.dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, f.Env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(kubeconfig, etcdDruidUser, etcdDruidUser); err != nil {
		t.Fatal(err)
	}
	args := []string{"--nats-url", f.Env.NATS.URL, "function", "purge",
		"--kubeconfig", kubeconfig, "--local-root", f.localRoot, "--cluster", pipeline.Cluster, "--types", "aws,azure,gcp,local,openstack",
		"--addr", "127.0.0.1:0", "--backoff-base", "100ms", "--backoff-max", "1s"}
	logs := f.logFile(t, "purge.log")
	cmd := exec.Command(bin, "-test.run=^TestHelperPurgeProcess$")
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), purgeHelperEnv+"="+strings.Join(args, "\n"))
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: etcdDruidCredential}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	f.purgeExited = func() string {
		select {
		case <-exited:
			return fmt.Sprintf("the purge process exited (%s); see %s", cmd.ProcessState, logs.Name())
		default:
			return ""
		}
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}

// TestHelperPurgeProcess is the purge process startPurgeProcess starts.
func TestHelperPurgeProcess(t *testing.T) {
	setting := os.Getenv(purgeHelperEnv)
	if setting == "" {
		t.Skip("the purge process of TestEtcdBackupRestoreWithHousekeepersSecrets")
	}
	if uid, gid := os.Getuid(), os.Getgid(); uid != etcdDruidUser || gid != etcdDruidUser {
		t.Fatalf("the purge process runs as %d:%d, want %d:%d", uid, gid, etcdDruidUser, etcdDruidUser)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if code := cli.Main(ctx, strings.Split(setting, "\n"), os.Stdout, os.Stderr, providers.All...); code != 0 {
		t.Fatalf("housekeeper function purge: exit %d", code)
	}
}
