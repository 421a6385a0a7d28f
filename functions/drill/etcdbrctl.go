package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Etcdbrctl is etcd-backup-restore's command line, etcdbrctl: a drill with one runs its
// `etcdbrctl restore` on the same backups, in a process of its own, and compares what it
// restores with the drill's own replay (RealRestore).
type Etcdbrctl struct {
	// Path is the executable.
	Path string
	// Version is the version it reports (etcdbrctl --version), v0.44.1 say.
	Version string
}

// Tool names it in results: etcd-backup-restore v0.44.1.
func (e *Etcdbrctl) Tool() string { return "etcd-backup-restore " + e.Version }

var versionLine = regexp.MustCompile(`etcd-backup-restore Version: (v?[0-9][0-9A-Za-z.+-]*)`)

// NewEtcdbrctl is the etcdbrctl at path, asked for its version: a path that does not run, or
// runs something that does not say it is etcd-backup-restore, is an error.
func NewEtcdbrctl(ctx context.Context, path string) (*Etcdbrctl, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, abs, "--version")
	cmd.Env = []string{"HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("etcdbrctl %s --version: %w: %s", abs, err, tail(out, 300))
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("etcdbrctl %s --version does not say an etcd-backup-restore version: %s", abs, tail(out, 300))
	}
	return &Etcdbrctl{Path: abs, Version: string(m[1])}, nil
}

// EtcdbrStore is where etcdbrctl reads a prefix's backups, configured as etcd-druid configures
// the backup-restore sidecar from a shoot's etcd-backup secret: the provider's settings
// (objectstore.EtcdbrStore), --store-prefix, STORAGE_CONTAINER, and the secret's data as files.
type EtcdbrStore struct {
	objectstore.EtcdbrStore
	// Container is the bucket (STORAGE_CONTAINER).
	Container string
	// Prefix is --store-prefix, <entry>/etcd-main: the snapshots are under <Prefix>/v2/.
	Prefix string
	// Credentials are the secret's data, written as files for the run only.
	Credentials map[string][]byte
}

// NewEtcdbrStore is the store of the backups under prefix (a drill's, ending in "/") in the
// bucket w, opened with credentials: what etcdbrctl is given to read them. The provider of w's
// type in providers says how etcd-backup-restore reads it.
func NewEtcdbrStore(w objectstore.Where, credentials map[string][]byte, prefix string, providers objectstore.Registry) (*EtcdbrStore, error) {
	p, err := providers.Get(w.Type)
	if err != nil {
		return nil, err
	}
	ep, ok := p.(objectstore.EtcdbrProvider)
	if !ok {
		return nil, fmt.Errorf("etcd-backup-restore has no storage provider for type %q", w.Type)
	}
	store, err := ep.EtcdbrStore(w, credentials)
	if err != nil {
		return nil, err
	}
	return &EtcdbrStore{EtcdbrStore: store, Container: w.Bucket, Prefix: strings.TrimSuffix(prefix, "/"), Credentials: credentials}, nil
}

// args are etcdbrctl's store flags.
func (s *EtcdbrStore) args() []string {
	args := []string{"--storage-provider=" + s.Provider, "--store-prefix=" + s.Prefix}
	if s.EndpointOverride != "" {
		args = append(args, "--store-endpoint-override="+s.EndpointOverride)
	}
	return args
}

// env is etcdbrctl's environment with the credentials as files in dir: nothing of the drill's
// own environment (its tokens, its proxy settings) reaches it.
func (s *EtcdbrStore) env(dir, home string) ([]string, error) {
	for key, value := range s.Credentials {
		if key == "" || strings.ContainsAny(key, `/\`) || key == "." || key == ".." {
			continue // no file name; etcd-backup-restore could not read it either
		}
		if err := os.WriteFile(filepath.Join(dir, key), value, 0o600); err != nil {
			return nil, err
		}
	}
	env := []string{"STORAGE_CONTAINER=" + s.Container, "HOME=" + home, "TMPDIR=" + home}
	if s.Home != "" {
		env[1] = "HOME=" + s.Home
	}
	if s.CredentialsEnv != "" {
		env = append(env, s.CredentialsEnv+"="+filepath.Join(dir, s.CredentialsFile))
	}
	return env, nil
}

// redact replaces every credential value of s in text.
func (s *EtcdbrStore) redact(text string) string {
	for _, v := range s.Credentials {
		if len(v) >= 4 {
			text = strings.ReplaceAll(text, string(v), "[redacted]")
		}
	}
	return text
}

// maxDiffKeys bounds the keys a difference names.
const maxDiffKeys = 10

// RealRestore is what etcd-backup-restore's own restore made of the backups a drill restored,
// compared with the drill's replay at the drill's Revision.
type RealRestore struct {
	// Outcome is one of the RealRestore outcomes.
	Outcome string `json:"outcome"`
	// Tool is etcd-backup-restore and its version; "" when it was not run.
	Tool string `json:"tool,omitempty"`
	// NotRun says why it was not run (NotRun, NotApplicable); "" when it was.
	NotRun string `json:"notRun,omitempty"`
	// Revision is the revision of the store it restored.
	Revision int64 `json:"revision,omitempty"`
	// Keys, KVSHA256 and HashKV are its store's at the drill's Revision, as Result's.
	Keys     int64  `json:"keys,omitempty"`
	KVSHA256 string `json:"kvSHA256,omitempty"`
	HashKV   uint32 `json:"hashKV,omitempty"`
	// Agrees says its store holds the drill's keys and values at the drill's Revision.
	Agrees bool `json:"agrees"`
	// Missing are keys the drill restored that it lacks, Extra keys it holds that the drill
	// did not restore, Changed keys both hold with other values: at most 10 of all three
	// together, in key order; keys only, never values.
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Duration is how long its restore took.
	Duration time.Duration `json:"durationNanoseconds,omitempty"`
}

// RealRestore's outcomes.
const (
	// RealRestoreAgrees: it restores the replay's keys and values at the replay's revision.
	RealRestoreAgrees = "Agrees"
	// RealRestoreDiffers: it restores, but not what the replay restored (ErrRealRestoreDiffers).
	RealRestoreDiffers = "Differs"
	// RealRestoreFails: it fails on backups the replay restored (ErrRealRestoreFailed).
	RealRestoreFails = "Fails"
	// RealRestoreNotCompared: the drill could not run it or read its store (ErrDrill).
	RealRestoreNotCompared = "NotCompared"
	// RealRestoreNotRun: not configured for these backups, which it reads (NotRun says what
	// is missing): the replay stands alone.
	RealRestoreNotRun = "NotRun"
	// RealRestoreNotApplicable: not for these backups, which it does not read (the snapshot
	// function's full snapshots: NotRun says so), which etcdutl's snapshot restore restores,
	// as the replay does.
	RealRestoreNotApplicable = "NotApplicable"
)

// Summary says in one line what the real restore found, for a status.
func (r *RealRestore) Summary() string {
	switch {
	case r == nil:
		return ""
	case r.Outcome == RealRestoreNotRun:
		return "etcd-backup-restore's restore not run: " + r.NotRun
	case r.Outcome == RealRestoreNotApplicable:
		return "etcd-backup-restore's restore does not apply: " + r.NotRun
	case r.Outcome == RealRestoreAgrees:
		return fmt.Sprintf("%s agrees: it restores the same %s keys and values at revision %s", r.Tool, thousands(r.Keys), thousands(r.Revision))
	case r.Outcome == RealRestoreDiffers:
		return r.Tool + " differs: it restores another store (reason)"
	case r.Outcome == RealRestoreFails:
		return r.Tool + " fails to restore the backups (reason)"
	}
	return r.Tool + " not compared: the drill could not run it or read its store (reason)"
}

// runEtcdbrctl runs `etcdbrctl restore` of store into dataDir (which must not exist), with
// its temporary files and the credentials under work. A restore that exits non-zero is
// ErrRealRestoreFailed with its exit and the tail of its output, a process killed by a
// signal (out of memory, say) or cut off by ctx is ErrDrill.
func runEtcdbrctl(ctx context.Context, e *Etcdbrctl, store *EtcdbrStore, work, dataDir string, quota int64) error {
	creds := filepath.Join(work, "etcdbr-credentials")
	temp := filepath.Join(work, "etcdbr-temp")
	for _, d := range []string{creds, temp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return &Error{Err: ErrDrill, Detail: "preparing etcdbrctl's directories", Cause: err}
		}
	}
	defer os.RemoveAll(creds)
	env, err := store.env(creds, temp)
	if err != nil {
		return &Error{Err: ErrDrill, Detail: "writing etcdbrctl's credentials", Cause: err}
	}
	args := append([]string{"restore",
		"--name=" + memberName,
		"--data-dir=" + dataDir,
		"--initial-cluster=" + memberName + "=" + loopback,
		"--initial-advertise-peer-urls=" + loopback,
		"--restoration-temp-snapshots-dir=" + filepath.Join(temp, "restoration.temp"),
		"--snapstore-temp-directory=" + temp,
		fmt.Sprintf("--embedded-etcd-quota-bytes=%d", quota),
	}, store.args()...)
	cmd := exec.CommandContext(ctx, e.Path, args...)
	cmd.Env = env
	cmd.Dir = temp
	out := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own: a stop reaches whatever it starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if err == nil {
		return nil
	}
	why := tail([]byte(store.redact(string(out.Bytes()))), 400)
	if ctx.Err() != nil {
		return &Error{Err: ErrDrill, Detail: fmt.Sprintf("%s's restore cut off: %s", e.Tool(), why), Cause: ctx.Err()}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &Error{Err: ErrDrill, Detail: fmt.Sprintf("%s's restore was killed by %s (out of memory?): %s", e.Tool(), ws.Signal(), why)}
		}
		return &Error{Err: ErrRealRestoreFailed, Detail: fmt.Sprintf("%s fails to restore the backups the drill restored (exit code %d): %s", e.Tool(), exit.ExitCode(), why)}
	}
	return &Error{Err: ErrDrill, Detail: fmt.Sprintf("running %s", e.Path), Cause: err}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool // bytes before buf were dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf, t.cut = append(t.buf[:0], t.buf[over:]...), true
	}
	return len(p), nil
}

// Bytes are the whole lines kept: a line cut at the start is dropped (a value in it could not
// be recognised to redact).
func (t *tailBuffer) Bytes() []byte {
	if i := bytes.IndexByte(t.buf, '\n'); t.cut && i >= 0 {
		return t.buf[i+1:]
	} else if t.cut {
		return nil
	}
	return t.buf
}

// logrusMsg is the message of one of etcdbrctl's log lines (logrus's text format).
var logrusMsg = regexp.MustCompile(`level=(\w+) msg="((?:[^"\\]|\\.)*)"`)

// tail is the end of a process's output, at most n bytes on one line: its last messages at
// level error, fatal or panic (and a Go panic's first line), or its last messages where it
// logged none, each with its level, without timestamps.
func tail(out []byte, n int) string {
	var all, errs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		l = strings.TrimSpace(l)
		if m := logrusMsg.FindStringSubmatch(l); m != nil {
			msg := m[1] + ": " + strings.ReplaceAll(m[2], `\"`, `"`)
			all = append(all, msg)
			if m[1] == "error" || m[1] == "fatal" || m[1] == "panic" {
				errs = append(errs, msg)
			}
		} else if l != "" {
			all = append(all, l)
			if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
				errs = append(errs, l)
			}
		}
	}
	msgs := all
	if len(errs) > 0 {
		msgs = errs
	}
	s := ""
	for i := len(msgs) - 1; i >= 0; i-- {
		if s == "" {
			s = msgs[i]
		} else if len(s)+len(msgs[i])+3 <= n {
			s = msgs[i] + " | " + s
		} else {
			break
		}
	}
	return kube.Truncate(string(bytes.ToValidUTF8([]byte(s), []byte("?"))), n)
}

// thousands writes n with a comma between each three digits: 18,250.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
