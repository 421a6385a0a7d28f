package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// EtcdBRDir is the directory with etcdbrctl and the etcd release it links, as
// scripts/install-etcdbr.sh builds them.
func EtcdBRDir() (string, error) {
	return installed("scripts/install-etcdbr.sh", func(v map[string]string) string {
		return filepath.Join("etcdbr", fmt.Sprintf("etcdbrctl-%s-etcd-%s", v["ETCDBR_VERSION"], v["ETCDBR_ETCD_VERSION"]))
	}, "etcdbrctl", "etcd")
}

// Etcd34Dir is the directory with the etcd v3.4 a shoot runs by default (etcd-druid's
// etcd-wrapper without UpgradeEtcdVersion), as scripts/install-etcdbr.sh builds it: an EtcdBR
// with it as BinDir runs that etcd.
func Etcd34Dir() (string, error) {
	return installed("scripts/install-etcdbr.sh", func(v map[string]string) string {
		return filepath.Join("etcdbr", "etcd-"+v["ETCD34_VERSION"])
	}, "etcd")
}

// EtcdBR runs etcd and etcd-backup-restore (etcdbrctl) as processes, the way etcd-druid runs
// them in a shoot's etcd pod: etcdbrctl with umask 0077 (files 0600, directories 0700) and,
// when RunAs is set, both as that user (etcd-druid's 65532).
type EtcdBR struct {
	// BinDir holds etcd and etcdbrctl; RunAs must be able to execute them.
	BinDir string
	// Logs receives the processes' output.
	Logs io.Writer
	// RunAs is the user the processes run as; nil: this process's user. Switching users
	// needs root.
	RunAs *syscall.Credential
}

// NewEtcdBR runs the binaries from scripts/install-etcdbr.sh's cache as this process's user.
func NewEtcdBR(logs io.Writer) (*EtcdBR, error) {
	dir, err := EtcdBRDir()
	if err != nil {
		return nil, err
	}
	return &EtcdBR{BinDir: dir, Logs: logs}, nil
}

// EtcdMember is one single-member etcd cluster's identity: its name, data directory and
// loopback URLs, fixed before it starts so that a restore can give the data directory the
// membership the server then starts with.
type EtcdMember struct {
	Name      string
	DataDir   string
	ClientURL string
	PeerURL   string
}

// NewEtcdMember chooses free loopback ports for a member named name with its data in dataDir.
func NewEtcdMember(name, dataDir string) (*EtcdMember, error) {
	m := &EtcdMember{Name: name, DataDir: dataDir}
	if err := m.choosePorts(); err != nil {
		return nil, err
	}
	return m, nil
}

// choosePorts sets m's URLs to free loopback ports.
func (m *EtcdMember) choosePorts() error {
	client, err := FreePort()
	if err != nil {
		return err
	}
	peer, err := FreePort()
	if err != nil {
		return err
	}
	m.ClientURL, m.PeerURL = "http://127.0.0.1:"+strconv.Itoa(client), "http://127.0.0.1:"+strconv.Itoa(peer)
	return nil
}

func (m *EtcdMember) initialCluster() string { return m.Name + "=" + m.PeerURL }

// Etcd is a running etcd server.
type Etcd struct {
	*EtcdMember
	proc *Process
}

// StartEtcd starts etcd for m — a new cluster, or the one a restore left in m.DataDir — and
// waits until it reports healthy. A new member's ports were probed free before it started, and
// another process may have bound one since: such a member is started again, up to three times,
// on fresh ports (m's URLs change); a restored one keeps the peer URL its data holds.
func (b *EtcdBR) StartEtcd(m *EtcdMember) (*Etcd, error) {
	_, err := os.Stat(m.DataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return b.startEtcd(m)
	}
	for attempt := 1; ; attempt++ {
		e, err := b.startEtcd(m)
		if err == nil || attempt == 3 {
			return e, err
		}
		if err := os.RemoveAll(m.DataDir); err != nil {
			return nil, err
		}
		if err := m.choosePorts(); err != nil {
			return nil, err
		}
	}
}

func (b *EtcdBR) startEtcd(m *EtcdMember) (*Etcd, error) {
	if err := b.ownedDir(m.DataDir); err != nil {
		return nil, err
	}
	p, err := StartProcess(b.command(context.Background(), "etcd",
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initialCluster(), "--initial-cluster-state", "new",
		"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "30m", // etcd-druid's defaults
		"--log-level", "warn"))
	if err != nil {
		return nil, err
	}
	e := &Etcd{EtcdMember: m, proc: p}
	if err := e.waitHealthy(30 * time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops etcd and waits for it to exit.
func (e *Etcd) Stop() { e.proc.Stop() }

// SnapshotOptions are the snapshot settings of an Etcd resource's spec.backup.
type SnapshotOptions struct {
	// FullSnapshotSchedule is a cron schedule; etcdbrctl snapshot also takes a full snapshot
	// when it starts.
	FullSnapshotSchedule string
	// DeltaSnapshotPeriod is how often the changes since the last snapshot are saved.
	DeltaSnapshotPeriod time.Duration
	// MaxBackups is how many full snapshots (with their deltas) garbage collection keeps.
	MaxBackups int
	// TempDir is etcd-druid's <data volume>/temp, the snapstore's scratch directory.
	TempDir string
}

// Snapshotter is a running `etcdbrctl snapshot`: etcd-backup-restore's backup loop.
type Snapshotter struct{ proc *Process }

// StartSnapshotter runs `etcdbrctl snapshot` against etcd, saving to store, with the flags
// etcd-druid gives the backup-restore sidecar (its statefulset builder's backup-store,
// snapshot, garbage-collection, compression and connection arguments, at its defaults where
// o does not say otherwise).
func (b *EtcdBR) StartSnapshotter(etcd *Etcd, store *BackupStore, o SnapshotOptions) (*Snapshotter, error) {
	if err := b.ownedDir(o.TempDir); err != nil {
		return nil, err
	}
	if err := b.prepareStore(store); err != nil {
		return nil, err
	}
	args := []string{"snapshot",
		"--endpoints=" + etcd.ClientURL,
		"--insecure-transport=true",
		"--insecure-skip-tls-verify=true",
		"--etcd-connection-timeout=30s",
		"--etcd-snapshot-timeout=15m",
		"--snapstore-temp-directory=" + o.TempDir,
		"--schedule=" + o.FullSnapshotSchedule,
		"--delta-snapshot-period=" + o.DeltaSnapshotPeriod.String(),
		"--delta-snapshot-memory-limit=104857600",
		"--garbage-collection-policy=LimitBased",
		"--max-backups=" + strconv.Itoa(o.MaxBackups),
		"--compress-snapshots=true",
		"--compression-policy=gzip",
	}
	cmd := b.command(context.Background(), "etcdbrctl", append(args, store.Args()...)...)
	cmd.Env = append(os.Environ(), store.Env()...)
	p, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &Snapshotter{proc: p}, nil
}

// Stop stops the snapshotter and waits for it to exit.
func (s *Snapshotter) Stop() { s.proc.Stop() }

// Restore runs `etcdbrctl restore`: it fetches the latest full snapshot and the deltas after it
// from store and builds m.DataDir from them, for StartEtcd(m). m.DataDir must not exist yet.
func (b *EtcdBR) Restore(ctx context.Context, store *BackupStore, m *EtcdMember, tempDir string) error {
	cmd, err := b.RestoreCommand(ctx, store, m, tempDir)
	if err != nil {
		return err
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("etcdbrctl restore (see its log): %w", err)
	}
	return nil
}

// RestoreCommand prepares the directories and the store for Restore and returns its `etcdbrctl
// restore` unstarted, for a caller that measures the process (its pid is etcdbrctl's: the
// shell that sets the umask execs it).
func (b *EtcdBR) RestoreCommand(ctx context.Context, store *BackupStore, m *EtcdMember, tempDir string) (*exec.Cmd, error) {
	if err := b.ownedDir(tempDir); err != nil {
		return nil, err
	}
	if err := b.ownedDir(filepath.Dir(m.DataDir)); err != nil {
		return nil, err
	}
	if err := b.prepareStore(store); err != nil {
		return nil, err
	}
	args := []string{"restore",
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--initial-cluster=" + m.initialCluster(),
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--restoration-temp-snapshots-dir=" + filepath.Join(tempDir, "restoration.temp"),
		"--snapstore-temp-directory=" + tempDir,
	}
	cmd := b.command(ctx, "etcdbrctl", append(args, store.Args()...)...)
	cmd.Env = append(os.Environ(), store.Env()...)
	return cmd, nil
}

// Initialize runs `etcdbrctl initialize` with args, its environment this process's with env
// added, as an init container runs it (gardenadm's etcdbrctl-initialize): it checks the data
// directory args name and restores it from the store they name where it is missing or corrupt.
// The caller prepares the directories.
func (b *EtcdBR) Initialize(ctx context.Context, args, env []string) error {
	cmd := b.command(ctx, "etcdbrctl", append([]string{"initialize"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("etcdbrctl initialize (see its log): %w", err)
	}
	return nil
}

// CopyCommand prepares the directories and the stores for `etcdbrctl copy` — etcd-backup-restore's
// copier, which copies the snapshots of src missing by name at dst — and returns it unstarted,
// for a caller that measures the process. src and dst must not both be Local (each reads $HOME).
func (b *EtcdBR) CopyCommand(ctx context.Context, src, dst *BackupStore, tempDir string) (*exec.Cmd, error) {
	if src.Provider == "Local" && dst.Provider == "Local" {
		return nil, errors.New("etcdbrctl copy: a Local source and a Local destination would share $HOME")
	}
	if err := b.ownedDir(tempDir); err != nil {
		return nil, err
	}
	for _, s := range []*BackupStore{src, dst} {
		if err := b.prepareStore(s); err != nil {
			return nil, err
		}
	}
	args := append([]string{"copy",
		"--snapstore-temp-directory=" + tempDir,
		"--source-snapstore-temp-directory=" + tempDir,
	}, append(src.SourceArgs(), dst.Args()...)...)
	cmd := b.command(ctx, "etcdbrctl", args...)
	cmd.Env = append(append(os.Environ(), src.SourceEnv()...), dst.Env()...)
	return cmd, nil
}

// ownedDir creates dir (0700; missing parents 0755, so RunAs can reach it) and, with RunAs,
// hands it to that user, as a pod's volume is writable by the user of its containers.
func (b *EtcdBR) ownedDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if b.RunAs == nil {
		return nil
	}
	return os.Chown(dir, int(b.RunAs.Uid), int(b.RunAs.Gid))
}

// prepareStore does for a Local store what etcd-druid's init container
// change-backup-bucket-permissions does when etcd-backup-restore does not run as root: it
// hands the bucket directory, with everything in it, to that user (chown -R).
func (b *EtcdBR) prepareStore(s *BackupStore) error {
	if s.Provider != "Local" || b.RunAs == nil {
		return nil
	}
	return filepath.WalkDir(filepath.Join(s.Home, s.Container), func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(b.RunAs.Uid), int(b.RunAs.Gid))
	})
}

// command is bin from BinDir with args, as RunAs in a process group of its own (a stop reaches
// every process in it). etcdbrctl runs with umask 0077, as it does in its image.
func (b *EtcdBR) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	path := filepath.Join(b.BinDir, bin)
	var cmd *exec.Cmd
	if bin == "etcdbrctl" {
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `umask 0077 && exec "$0" "$@"`, path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Stdout, cmd.Stderr = b.Logs, b.Logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: b.RunAs}
	return cmd
}
