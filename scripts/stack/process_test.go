package stack

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A server that took the free port before the process bound it answers on the address, but is
// not the process's: AwaitListening waits for the process's own listener, and reports its exit.
func TestAwaitListeningWantsTheProcessOwnListener(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := strconv.Itoa(other.Addr().(*net.TCPAddr).Port)
	if !groupListensOn(syscall.Getpgrp(), port) {
		t.Fatalf("this test's own listener on %s is not seen as its group's", port)
	}
	p, err := StartProcess(exec.Command("sleep", "1"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.AwaitListening("sleep", other.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Errorf("AwaitListening with another process listening: %v, want the process's exit", err)
	}
}
