package stack

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// start starts cmd (its SysProcAttr should give it its own process group, which stop signals).
func start(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Args[0], err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// process is a started process group.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group, then SIGKILL after 10 s, and waits for the exit.
func (p *process) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// awaitListening waits until p accepts connections on addr (30 s at most); a process that
// exits or never listens is stopped and named in the error.
func (p *process) awaitListening(name, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening on %s (see its log)", name, addr)
		case <-ctx.Done():
			p.stop()
			return fmt.Errorf("%s did not listen on %s within 30s", name, addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
