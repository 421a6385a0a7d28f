package faults

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The short form of `make faults`: the whole stack as processes, broken by every kind of fault
// while a workload runs, must converge with every invariant holding.
func TestFaultsShort(t *testing.T) {
	dir, err := os.MkdirTemp("", "housekeeper-faults-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Short()
	cfg.Dir, cfg.Out = dir, testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	report, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("running the suite: %v (logs in %s)", err, dir)
	}
	report.Print(testWriter{t})
	if !report.OK() {
		t.Fatalf("invariants violated; logs and stores kept in %s", dir)
	}
	for _, kind := range faultKinds {
		if report.Faults[kind] == 0 {
			t.Errorf("fault %q was never injected", kind)
		}
	}
	if !t.Failed() {
		_ = os.RemoveAll(dir)
	}
}
