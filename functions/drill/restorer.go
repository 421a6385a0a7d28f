package drill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The drill reads a snapshot's bbolt pages only in a restorer: the process that links this
// package, started again with restorerEnv set to a restoreRequest. bbolt trusts its pages; a
// malformed one panics (in a goroutine of its own when it rebuilds the freelist) or faults on
// the mapped file, which no recover catches. In a process of its own that ends the restorer, and
// the drill reports it; every other drill of the function goes on.
//
// The restorer restores the full snapshot's db into a data directory (etcdutl's snapshot
// restore), checks it (etcdutl's snapshot status) and reports the status on stdout; told
// "serve" on stdin, it starts an embedded etcd on the data directory, reports the loopback
// endpoint it serves, and serves until stdin closes. Its messages are JSON lines
// (restorerMessage).
const restorerEnv = "HOUSEKEEPER_DRILL_RESTORER"

// init turns the process into a restorer when it was started as one: before main, so that every
// binary linking the drill (housekeeper, a test binary) is its own restorer and none needs a
// command for it.
func init() {
	if req, ok := os.LookupEnv(restorerEnv); ok {
		os.Exit(restorerMain(req, os.Stdin, os.Stdout, os.Stderr))
	}
}

// restoreRequest is what a restorer is asked to do.
type restoreRequest struct {
	// Snapshot, if set, is the full snapshot's db, restored into DataDir (which must not exist)
	// and removed; unset, DataDir holds a restored member already (etcdbrctl's).
	Snapshot   string `json:"snapshot,omitempty"`
	DataDir    string `json:"dataDir"`
	Quota      int64  `json:"quota"`
	MaxRequest uint   `json:"maxRequest"`
}

// restorerMessage is one line a restorer writes: one of its fields is set.
type restorerMessage struct {
	// Restored: the snapshot's db was restored into the data directory.
	Restored bool `json:"restored,omitempty"`
	// Status is the data directory's db as etcdutl's snapshot status reads it.
	Status *snapshot.Status `json:"status,omitempty"`
	// Endpoint is the embedded etcd's client address (host:port).
	Endpoint string `json:"endpoint,omitempty"`
	// Failure is why the restorer stops.
	Failure *restorerFailure `json:"failure,omitempty"`
}

// The steps of a restorer, which its failures name.
const (
	stepRestore = "restore"
	stepStatus  = "status"
	stepServe   = "serve"
)

// restorerFailure is why a restorer failed: what it said, or how it ended.
type restorerFailure struct {
	// Step is the step it failed in.
	Step string `json:"step"`
	// Message is its error, or the first line of its panic or fatal error.
	Message string `json:"message"`
	// Crashed: it ended without saying why (a panic, a fatal error: bbolt on a malformed page).
	Crashed bool `json:"-"`
	// NotTheData: the failure says nothing about the data (no space, no permission, killed by
	// a signal, cut off, could not start).
	NotTheData bool `json:"notTheData,omitempty"`
}

func (f *restorerFailure) Error() string {
	if f.Crashed {
		return "the restore process crashed: " + f.Message
	}
	return f.Message
}

// restorerMain is a restorer's main: req is its restoreRequest as JSON. It returns the exit code.
func restorerMain(req string, in io.Reader, out, logs io.Writer) int {
	enc := json.NewEncoder(out)
	fail := func(step string, err error) int {
		notTheData := errors.Is(err, syscall.ENOSPC) || errors.Is(err, fs.ErrPermission)
		_ = enc.Encode(restorerMessage{Failure: &restorerFailure{Step: step, Message: err.Error(), NotTheData: notTheData}})
		return 1
	}
	var r restoreRequest
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		return fail(stepRestore, fmt.Errorf("reading the request: %w", err))
	}
	// etcd's and etcdutl's warnings and errors: the drill keeps the last of them as a reason.
	lg := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zap.WarnLevel))
	if r.Snapshot != "" {
		if err := restoreDB(lg, r.Snapshot, r.DataDir); err != nil {
			return fail(stepRestore, err)
		}
		_ = os.Remove(r.Snapshot) // the data directory has its copy
		if err := enc.Encode(restorerMessage{Restored: true}); err != nil {
			return 1
		}
	}
	// A structural check of the db (bbolt's), its keys and revision, before a server runs on it.
	status, err := snapshot.NewV3(lg).Status(filepath.Join(r.DataDir, "member", "snap", "db"))
	if err != nil {
		return fail(stepStatus, err)
	}
	if err := enc.Encode(restorerMessage{Status: &status}); err != nil {
		return 1
	}
	stdin := bufio.NewReader(in)
	if line, _ := stdin.ReadString('\n'); strings.TrimSpace(line) != "serve" {
		return 0 // the drill needs no server on it
	}
	e, err := startEmbedded(context.Background(), lg, r.DataDir, r.Quota, r.MaxRequest)
	if err != nil {
		return fail(stepServe, err)
	}
	defer e.Close()
	if err := enc.Encode(restorerMessage{Endpoint: e.Clients[0].Addr().String()}); err != nil {
		return 1
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	select {
	case <-closed:
		return 0
	case err := <-e.Err():
		return fail(stepServe, fmt.Errorf("etcd stopped serving: %w", err))
	}
}

// restorer is a running restorer, seen from the drill.
type restorer struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	dec    *json.Decoder
	logs   *tailBuffer
	// exited is closed once the process has exited; then failure says how, nil if with 0.
	exited  chan struct{}
	failure *restorerFailure
	// ctx is the drill's context, cancelled when the process exits: a call to its etcd fails
	// at once rather than retrying a server that is gone.
	ctx    context.Context
	cancel context.CancelFunc
	// status is the data directory's db, as it reported it.
	status    snapshot.Status
	closeOnce sync.Once
}

// startRestorer starts a restorer of req and waits for the status of its data directory. Its
// Go soft memory limit is memoryLimit (0: none); its log lines go to lg. A failure is a
// *restorerFailure.
func startRestorer(ctx context.Context, lg *zap.Logger, req restoreRequest, memoryLimit int64) (*restorer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &restorerFailure{Step: stepRestore, Message: "finding the drill's own executable: " + err.Error(), NotTheData: true}
	}
	r := &restorer{logs: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.cmd = exec.CommandContext(ctx, exe)
	r.cmd.Env = restorerEnviron(req, memoryLimit)
	r.cmd.Stderr = io.MultiWriter(r.logs, &lineLogger{lg: lg})
	// A process group of its own, as etcdbrctl's: a stop reaches all of it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.Cancel = func() error { return syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) }
	r.cmd.WaitDelay = 10 * time.Second
	// Pipes of our own rather than the command's: they are read and written while it runs,
	// and Wait closes neither.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, &restorerFailure{Step: stepRestore, Message: "making the restore process's pipes: " + err.Error(), NotTheData: true}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, &restorerFailure{Step: stepRestore, Message: "making the restore process's pipes: " + err.Error(), NotTheData: true}
	}
	r.cmd.Stdin, r.cmd.Stdout = inR, outW
	err = r.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, &restorerFailure{Step: stepRestore, Message: "starting the restore process: " + err.Error(), NotTheData: true}
	}
	r.stdin, r.stdout, r.dec = inW, outR, json.NewDecoder(outR)
	go func() {
		err := r.cmd.Wait()
		r.failure = r.ended(ctx, err)
		close(r.exited)
		r.cancel()
	}()
	step := stepStatus
	if req.Snapshot != "" {
		step = stepRestore
	}
	for {
		m, err := r.next(step)
		if err != nil {
			r.close()
			return nil, err
		}
		switch {
		case m.Restored:
			step = stepStatus
		case m.Status != nil:
			r.status = *m.Status
			return r, nil
		}
	}
}

// restorerEnviron is a restorer's whole environment: nothing of the drill's own (its tokens,
// its credentials) reaches it.
func restorerEnviron(req restoreRequest, memoryLimit int64) []string {
	b, _ := json.Marshal(req) // strings and numbers only
	env := []string{restorerEnv + "=" + string(b), "TMPDIR=" + filepath.Dir(req.DataDir)}
	if memoryLimit > 0 {
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", memoryLimit))
	}
	return env
}

// next reads the restorer's next message in step; a failure it reports, or its end without
// one, is a *restorerFailure.
func (r *restorer) next(step string) (restorerMessage, error) {
	var m restorerMessage
	if err := r.dec.Decode(&m); err != nil {
		<-r.exited
		if r.failure != nil {
			r.failure.Step = step
			return m, r.failure
		}
		return m, &restorerFailure{Step: step, Message: "the restore process ended without a word: " + tail(r.logs.Bytes(), 400), Crashed: true}
	}
	if m.Failure != nil {
		return m, m.Failure
	}
	return m, nil
}

// ended says how the process ended with err, from Wait; nil for exit code 0.
func (r *restorer) ended(ctx context.Context, err error) *restorerFailure {
	if err == nil {
		return nil
	}
	why := tail(r.logs.Bytes(), 400)
	if ctx.Err() != nil {
		return &restorerFailure{Message: "the restore process was cut off: " + ctx.Err().Error(), NotTheData: true}
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return &restorerFailure{Message: "running the restore process: " + err.Error(), NotTheData: true}
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &restorerFailure{Message: fmt.Sprintf("the restore process was killed by %s (out of memory?): %s", ws.Signal(), why), NotTheData: true}
	}
	// A Go panic or fatal error (a fault on the mapped db) exits 2 with its first line in why.
	return &restorerFailure{Message: why, Crashed: true}
}

// serve asks the restorer for an etcd on its data directory and connects a client to it,
// allowed requests of maxRequest bytes. A failure is a *restorerFailure.
func (r *restorer) serve(lg *zap.Logger, maxRequest uint) (*throwaway, error) {
	if _, err := r.stdin.WriteString("serve\n"); err != nil {
		<-r.exited
		if r.failure != nil {
			r.failure.Step = stepServe
			return nil, r.failure
		}
		return nil, &restorerFailure{Step: stepServe, Message: "the restore process ended: " + err.Error(), Crashed: true}
	}
	m, err := r.next(stepServe)
	if err != nil {
		return nil, err
	}
	t := &throwaway{proc: r, endpoint: m.Endpoint, cancel: func() {}}
	t.client, err = clientv3.New(clientv3.Config{
		Endpoints:          []string{"http://" + t.endpoint},
		DialTimeout:        10 * time.Second,
		MaxCallSendMsgSize: int(maxRequest) + requestOverhead,
		MaxCallRecvMsgSize: int(maxRequest) + requestOverhead,
		Logger:             lg,
	})
	if err != nil {
		return nil, &restorerFailure{Step: stepServe, Message: "connecting to the restored etcd: " + err.Error(), NotTheData: true}
	}
	return t, nil
}

// close stops the restorer (closing its stdin ends it; one that does not end within a
// minute is killed) and says how it ended: a *restorerFailure, or nil. It may be called again.
func (r *restorer) close() error {
	r.closeOnce.Do(func() {
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.exited
		}
		r.stdout.Close()
	})
	if r.failure != nil {
		return r.failure
	}
	return nil
}

// died is how the restorer ended, if it has without being told to: after a failed call to its
// etcd, whether the process behind it crashed.
func (r *restorer) died() *restorerFailure {
	select {
	case <-r.exited:
		return r.failure
	case <-time.After(time.Second):
		return nil
	}
}

// lineLogger logs each line written to it, a restorer's log line, at warning level: the
// restorer logs warnings and errors only.
type lineLogger struct {
	lg      *zap.Logger
	partial []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(l.partial[:i]); len(line) > 0 {
			l.lg.Warn("restore process", zap.ByteString("line", line))
		}
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 { // a line that long is cut rather than held
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

// restoreFailed is the drill's error for a restorer's failure on s, a full snapshot: its db
// does not restore, check or serve (ErrCorrupt), or the drill could not tell (ErrDrill: no
// space, killed, an etcd that did not start).
func (s Snapshot) restoreFailed(err error) *Error {
	var f *restorerFailure
	if !errors.As(err, &f) {
		return s.fail(ErrDrill, err, "restoring its snapshot db")
	}
	sentinel := ErrCorrupt
	if f.NotTheData || (f.Step == stepServe && !f.Crashed) {
		sentinel = ErrDrill
	}
	switch f.Step {
	case stepRestore:
		return s.fail(sentinel, f, "restoring its snapshot db")
	case stepStatus:
		return s.fail(sentinel, f, "checking its restored db")
	}
	return s.fail(sentinel, f, "starting etcd on its restored db")
}
