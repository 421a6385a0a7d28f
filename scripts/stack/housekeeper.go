package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BuildHousekeeper builds housekeeper's binaries — housekeeper and housekeeper-bridge — from
// the checkout at source ("": this repository) into dir. race builds them with -race, as tests
// are built, so the build reuses their compiled packages and a race shows in a process's log.
func BuildHousekeeper(ctx context.Context, source, dir string, race bool) error {
	if source == "" {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		source = root
	}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "-o", dir+"/", "./functions/cmd/housekeeper", "./bridge/cmd/housekeeper-bridge")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = source
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", source, err, out)
	}
	return nil
}

// Housekeeper runs housekeeper's binaries (BuildHousekeeper's directory) as a harness's
// processes, as the chart runs them: settings in HOUSEKEEPER_* variables, and nothing from the
// harness's own environment changing them.
type Housekeeper struct {
	Bin string
	// Env are the processes' settings, e.g. HOUSEKEEPER_NATS_URL=…, HOUSEKEEPER_KUBECONFIG=….
	Env []string
}

// Environ is the processes' environment: this process's without its HOUSEKEEPER_* and
// KUBECONFIG, then h.Env.
func (h Housekeeper) Environ() []string {
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOUSEKEEPER_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			environ = append(environ, kv)
		}
	}
	return append(environ, h.Env...)
}

// Bridge is housekeeper-bridge's command line with args.
func (h Housekeeper) Bridge(args ...string) []string {
	return append([]string{filepath.Join(h.Bin, "housekeeper-bridge")}, args...)
}

// Function is the command line of the function fn with args.
func (h Housekeeper) Function(fn string, args ...string) []string {
	return append([]string{filepath.Join(h.Bin, "housekeeper"), "function", fn}, args...)
}

// Command is argv (Bridge's, Function's) in the processes' environment, its output to log.
func (h Housekeeper) Command(log io.Writer, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.Environ()
	cmd.Stdout, cmd.Stderr = log, log
	return cmd
}

// Setup runs `housekeeper setup` with args: the streams and the consumers, before the bridge
// and the functions start. A binary older than the command (a benchmark's baseline) has its
// bridge and functions create them, and Setup does nothing.
func (h Housekeeper) Setup(ctx context.Context, log io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(h.Bin, "housekeeper"), append([]string{"setup"}, args...)...)
	cmd.Env = h.Environ()
	out, err := cmd.CombinedOutput()
	_, _ = log.Write(out)
	if err != nil && !strings.Contains(string(out), `unknown command "setup"`) {
		return fmt.Errorf("housekeeper setup: %v\n%s", err, out)
	}
	return nil
}

// Start starts argv in the processes' environment as the process name, serving /readyz and
// /metrics on a free --addr, its output to log.
func (h Housekeeper) Start(name string, log io.Writer, argv ...string) (*Served, error) {
	return StartServed(name, h.Command(log, argv...))
}

// Proc is one of housekeeper's processes StartAll starts: its name, its command line (Bridge's,
// Function's).
type Proc struct {
	Name string
	Argv []string
}

// StartAll runs `housekeeper setup` with setup, then starts procs, each as Start does with its
// output to logs(its name), and waits a minute at most until every one is ready. On an error it
// stops those it started.
func (h Housekeeper) StartAll(ctx context.Context, logs func(name string) io.Writer, setup []string, procs ...Proc) ([]*Served, error) {
	if err := h.Setup(ctx, logs("setup"), setup...); err != nil {
		return nil, err
	}
	var started []*Served
	for _, p := range procs {
		s, err := h.Start(p.Name, logs(p.Name), p.Argv...)
		if err != nil {
			_ = StopAll(started)
			return nil, err
		}
		started = append(started, s)
	}
	end := time.Now().Add(time.Minute)
	for _, s := range started {
		if err := s.AwaitReady(time.Until(end)); err != nil {
			_ = StopAll(started)
			return nil, err
		}
	}
	return started, nil
}

// Served is a process serving /readyz and /metrics at Addr.
type Served struct {
	*Process
	Name string // for messages and a harness's tables
	Addr string
}

// StartServed starts cmd as the process name with --addr on a free port of 127.0.0.1.
func StartServed(name string, cmd *exec.Cmd) (*Served, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd.Args = append(cmd.Args, "--addr", addr)
	p, err := StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Served{Process: p, Name: name, Addr: addr}, nil
}

// StopAll ends procs together, the last started signalled first: SIGTERM, then SIGKILL for any
// still running 10 s later, which it names.
func StopAll(procs []*Served) error {
	for _, p := range slices.Backward(procs) {
		_ = p.Signal(syscall.SIGTERM)
	}
	var errs []error
	end := time.Now().Add(10 * time.Second)
	for _, p := range slices.Backward(procs) {
		select {
		case <-p.Done():
		case <-time.After(time.Until(end)):
		}
		if !p.Exited() {
			errs = append(errs, fmt.Errorf("%s did not stop within 10s of SIGTERM", p.Name))
			_ = p.Signal(syscall.SIGKILL)
			<-p.Done()
		}
	}
	return errors.Join(errs...)
}

// AwaitReady waits until the process answers /readyz with 200, for at most timeout, and says
// so if it exits meanwhile.
func (s *Served) AwaitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return Poll(timeout, 100*time.Millisecond, s.Name+"'s /readyz to answer 200", func() (bool, string, error) {
		if s.Exited() {
			return false, "", fmt.Errorf("it exited while starting: %v", s.State())
		}
		resp, err := client.Get("http://" + s.Addr + "/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
}
