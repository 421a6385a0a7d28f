package stack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Azurite's well-known development account (documented by Microsoft; not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is a running in-memory Azurite blob service.
type Azurite struct {
	// Endpoint is the path-style service URL, http://127.0.0.1:<port>/devstoreaccount1.
	Endpoint string
	Port     int

	cmd  *exec.Cmd
	done chan struct{}
}

// StartAzurite starts azurite-blob in memory on a free loopback port, writing its access log
// to logs.
func StartAzurite(logs io.Writer) (*Azurite, error) {
	bin, err := AzuriteBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		a, err := startAzurite(bin, port, logs)
		if err == nil {
			return a, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startAzurite(bin string, port int, logs io.Writer) (*Azurite, error) {
	cmd := exec.Command(bin,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl",
		"--disableTelemetry")
	cmd.Dir = os.TempDir() // in memory: nothing is written, but never into the repository
	cmd.Stdout, cmd.Stderr = logs, logs
	// Own process group: Azurite is a node process tree, stopped as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	a := &Azurite{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount),
		Port:     port,
		cmd:      cmd,
		done:     make(chan struct{}),
	}
	go func() { _ = cmd.Wait(); close(a.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return a, nil
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("azurite exited before listening on %s (see its log)", addr)
		case <-ctx.Done():
			a.Stop()
			return nil, fmt.Errorf("azurite did not listen on %s within 30s", addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop terminates Azurite and waits for it to exit.
func (a *Azurite) Stop() {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
