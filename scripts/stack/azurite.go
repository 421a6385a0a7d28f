package stack

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
	// ServiceURL is the service URL template for any of its accounts: http://127.0.0.1:<port>/{account}.
	ServiceURL string
	Port       int

	proc *Process
}

// StartAzurite starts azurite-blob in memory on a free loopback port, writing its access log
// to logs. accounts ("name:key1[:key2]", as AZURITE_ACCOUNTS lists them) are served besides
// the development account.
func StartAzurite(logs io.Writer, accounts ...string) (*Azurite, error) {
	bin, err := AzuriteBinary()
	if err != nil {
		return nil, err
	}
	return OnFreePort(func(port int) (*Azurite, error) { return startAzurite(bin, port, logs, accounts) })
}

func startAzurite(bin string, port int, logs io.Writer, accounts []string) (*Azurite, error) {
	cmd := exec.Command(bin,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl",
		"--disableTelemetry")
	cmd.Dir = os.TempDir() // in memory: nothing is written, but never into the repository
	cmd.Stdout, cmd.Stderr = logs, logs
	if len(accounts) > 0 {
		// AZURITE_ACCOUNTS replaces the development account; keep it.
		all := append([]string{AzuriteAccount + ":" + AzuriteKey}, accounts...)
		cmd.Env = append(os.Environ(), "AZURITE_ACCOUNTS="+strings.Join(all, ";"))
	}
	// Own process group: Azurite is a node process tree, stopped as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	if err := proc.AwaitListening("azurite", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		return nil, err
	}
	return &Azurite{
		Endpoint:   fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount),
		ServiceURL: fmt.Sprintf("http://127.0.0.1:%d/{account}", port),
		Port:       port, proc: proc,
	}, nil
}

// Stop terminates Azurite and waits for it to exit.
func (a *Azurite) Stop() { a.proc.Stop() }
