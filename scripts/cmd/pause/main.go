// Command pause is the sandbox ("pause") container of the test node's pods (scripts/stack/node.go),
// in place of Kubernetes' registry.k8s.io/pause, which no registry here serves: it holds the
// pod's namespaces open, reaps the zombies a shared PID namespace hands it, and exits 0 on SIGTERM
// or SIGINT — what Kubernetes' pause.c does. Built static (CGO_ENABLED=0), it runs on an image
// without libc.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (housekeeper)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %s\n", sig)
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited: the processes of a pod sharing its PID namespace
// are re-parented to pause when their parent exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
