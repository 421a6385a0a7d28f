package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a started child process in its own process group: the one way every harness
// (the stack's components, the conformance, monitoring and fault suites, the benches) runs a
// binary and stops it.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess starts cmd in a process group of its own, which Stop signals.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Args[0], err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited says whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// Stop sends SIGTERM to the group, then SIGKILL after 10 s, and waits for the exit.
func (p *Process) Stop() {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// AwaitListening waits until p accepts connections on addr (30 s at most); a process that
// exits or never listens is stopped and named in the error. The listener must be p's (a process
// of its group): another server that took the free port between its probe and p's bind would
// answer too, while p exits on "address already in use".
func (p *Process) AwaitListening(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			if groupListensOn(p.Pid(), port) {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening on %s (see its log)", name, addr)
		case <-ctx.Done():
			p.Stop()
			return fmt.Errorf("%s did not listen on %s within 30s", name, addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// State is how the process exited (nil while it runs).
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Pid is the process's id (its group's too), for reading what it uses from /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// groupListensOn reports whether a process of process group pgid holds a socket listening on
// TCP port (decimal), as /proc/net/tcp{,6} and the processes' fds say. Where /proc cannot tell
// (another OS), it says yes.
func groupListensOn(pgid int, port string) bool {
	n, err := strconv.Atoi(port)
	if err != nil {
		return false
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// local_address is ADDR:PORT in hex; st 0A is LISTEN; the inode is the 10th field.
			if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], fmt.Sprintf(":%04X", n)) {
				continue
			}
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		_, err := os.Stat("/proc/net/tcp")
		return err != nil
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, proc := range procs {
		pid, err := strconv.Atoi(filepath.Base(proc))
		if err != nil {
			continue
		}
		// state ppid pgrp ...
		if f := procStat(pid); len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		fds, _ := filepath.Glob(filepath.Join(proc, "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && inodes[target] {
				return true
			}
		}
	}
	return false
}

// procStat is the fields of /proc/<pid>/stat after the command name, the state (field 3) first;
// nil if there is no such process. The name, in parentheses, may hold spaces: the fields are
// counted after its closing one.
func procStat(pid int) []string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}
