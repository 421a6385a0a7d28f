package stack

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// StopAll ends processes together: one that exits on SIGTERM is not named, one that ignores it
// is killed once the 10 s grace is over, and named.
func TestStopAllKillsAndNamesWhatIgnoresSIGTERM(t *testing.T) {
	start := func(name, script string) *Served {
		p, err := StartProcess(exec.Command("sh", "-c", script))
		if err != nil {
			t.Fatal(err)
		}
		return &Served{Process: p, Name: name}
	}
	polite := start("polite", "sleep 60 & wait")
	stubborn := start("stubborn", "trap '' TERM; sleep 60 & wait; sleep 60")
	time.Sleep(200 * time.Millisecond) // the trap set before the signal
	begun := time.Now()
	err := StopAll([]*Served{stubborn, polite})
	took := time.Since(begun)
	if err == nil || !strings.Contains(err.Error(), "stubborn did not stop") || strings.Contains(err.Error(), "polite") {
		t.Errorf("StopAll: %v, want only stubborn named", err)
	}
	if !polite.Exited() || !stubborn.Exited() {
		t.Errorf("after StopAll: polite exited %v, stubborn exited %v; want both", polite.Exited(), stubborn.Exited())
	}
	if took < 10*time.Second || took > 15*time.Second {
		t.Errorf("StopAll took %s, want the 10 s grace and little more", took)
	}
}
