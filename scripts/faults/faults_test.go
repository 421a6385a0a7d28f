package faults

import (
	"context"
	"os"
	"strconv"
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
// while a workload runs, must converge with every invariant holding. HOUSEKEEPER_FAULTS_SEED
// reproduces a run.
func TestFaultsShort(t *testing.T) { runShort(t, Short()) }

// The short form of `make faults CLUSTER=1`: the same on a JetStream cluster of three
// nats-server processes with R3 streams, whose stream, consumer and meta leaders are killed and
// whose quorum is taken away while purges come due.
func TestFaultsShortCluster(t *testing.T) { runShort(t, Short().OnCluster()) }

func runShort(t *testing.T, cfg Config) {
	dir, err := os.MkdirTemp("", "housekeeper-faults-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.Out = dir, testWriter{t}
	if s := os.Getenv("HOUSEKEEPER_FAULTS_SEED"); s != "" {
		if cfg.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("HOUSEKEEPER_FAULTS_SEED: %v", err)
		}
	}
	cfg.Timeout = 10 * time.Minute
	report, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("running the suite: %v (logs in %s)", err, dir)
	}
	if err := report.Print(testWriter{t}); err != nil {
		t.Error(err)
	}
	// One line per failure, short, so a truncated log still shows it.
	if report.Converged < 0 {
		t.Errorf("never converged within %s", cfg.Converge)
	}
	for _, inv := range report.Failed() {
		t.Errorf("FAIL %s: %s", inv.Name, inv.Detail)
	}
	for _, kind := range FaultKinds(cfg) {
		if report.Faults[kind] == 0 {
			t.Errorf("fault %q was never injected", kind)
		}
	}
	if t.Failed() {
		t.Logf("seed %d; logs, stores and report.txt kept in %s", report.Config.Seed, dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// A seed draws the same faults, in the same order, with the same choices.
func TestSeedReproducesTheFaults(t *testing.T) {
	draw := func(seed uint64) []faultStep {
		cfg := Short()
		cfg.Seed = seed
		plan := newFaultPlan(cfg)
		var steps []faultStep
		for range 3 * len(FaultKinds(cfg)) {
			steps = append(steps, plan.next())
		}
		return steps
	}
	same := func(a, b []faultStep) bool {
		for i := range a {
			if a[i].gap != b[i].gap || a[i].kind != b[i].kind || a[i].victim != b[i].victim || a[i].down != b[i].down ||
				a[i].pick.Uint64() != b[i].pick.Uint64() {
				return false
			}
		}
		return true
	}
	if !same(draw(7), draw(7)) {
		t.Error("seed 7 drew two different fault plans")
	}
	if same(draw(7), draw(8)) {
		t.Error("seeds 7 and 8 drew the same fault plan")
	}
	round := map[string]bool{}
	for _, step := range draw(7)[:len(FaultKinds(Short()))] {
		round[step.kind] = true
	}
	if len(round) != len(FaultKinds(Short())) {
		t.Errorf("the first round drew %d of the %d kinds", len(round), len(FaultKinds(Short())))
	}
}
