package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// process is one component run as a child process (a housekeeper binary, nats-server,
// Azurite), restartable after a kill: each run is a stack.Process. Its output is appended to
// one log file across restarts, and every exit is recorded with its status and whether the
// suite caused it.
type process struct {
	name string
	args []string
	env  []string // nil: this process's
	dir  string   // "": this process's
	log  *os.File
	// ready, if set, returns nil once a started process serves.
	ready func() error

	mu       sync.Mutex
	run      *stack.Process
	done     chan struct{} // closed once the current run's exit is recorded
	stopping bool          // the suite sent the signal that ends the current run
	killing  bool          // … and it was SIGKILL
	exits    []exit
}

// exit is one end of a process run.
type exit struct {
	process string
	status  string
	// caused is true for a SIGKILL of the fault injector, and for a clean exit (status 0 or
	// SIGTERM) after the suite asked the process to stop.
	caused bool
	// at is when the exit was seen.
	at time.Time
}

func newProcess(dir, name string, args, env []string) (*process, error) {
	log, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &process{name: name, args: args, env: env, log: log}, nil
}

func (p *process) start() error {
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.Stdout, cmd.Stderr = p.log, p.log
	run, err := stack.StartProcess(cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.run, p.done, p.stopping, p.killing = run, done, false, false
	p.mu.Unlock()
	go p.record(run, done)
	if p.ready == nil {
		return nil
	}
	return p.waitReady(done)
}

// record records how the run ended.
func (p *process) record(run *stack.Process, done chan struct{}) {
	<-run.Done()
	status, clean := exitStatus(run.State())
	p.mu.Lock()
	defer p.mu.Unlock()
	caused := p.stopping && (p.killing || clean)
	p.exits = append(p.exits, exit{process: p.name, status: status, caused: caused, at: time.Now()})
	close(done)
}

// exitStatus describes a run's end; clean is status 0 or SIGTERM.
func exitStatus(state *os.ProcessState) (status string, clean bool) {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String(), ws.Signal() == syscall.SIGTERM
	}
	return state.String(), state.Success()
}

func (p *process) waitReady(done chan struct{}) error {
	return stack.Poll(time.Minute, 100*time.Millisecond, p.name+" to be ready", func() (bool, string, error) {
		err := p.ready()
		if err == nil {
			return true, "", nil
		}
		select {
		case <-done:
			return false, "", fmt.Errorf("it exited first (see %s)", p.log.Name())
		default:
			return false, err.Error(), nil
		}
	})
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() { p.signal(syscall.SIGKILL, 0) }

// stop asks the process to shut down gracefully, then kills it after grace.
func (p *process) stop(grace time.Duration) { p.signal(syscall.SIGTERM, grace) }

func (p *process) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	run, done := p.run, p.done
	if run == nil || p.isDone() {
		p.mu.Unlock()
		return
	}
	p.stopping, p.killing = true, sig == syscall.SIGKILL
	p.mu.Unlock()
	_ = run.Signal(sig)
	if sig == syscall.SIGKILL {
		<-done
		return
	}
	select {
	case <-done:
	case <-time.After(grace):
		p.kill()
	}
}

// close stops the process for good and closes its log.
func (p *process) close() {
	p.stop(30 * time.Second)
	_ = p.log.Close()
}

// exited reports whether the process is not running (it ended and was not started again).
func (p *process) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil && p.isDone()
}

func (p *process) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// runs returns every recorded exit.
func (p *process) runs() []exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]exit(nil), p.exits...)
}
