package faults

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run found.
type Report struct {
	Config   Config
	Workload string
	Faults   map[string]int
	// Recovered is, per NATS fault kind, how long after each fault JetStream answered with
	// every leader elected (the stream's and each function's consumer's).
	Recovered map[string][]time.Duration
	// Converged is the time from the last fault until every invariant held; -1 if never.
	Converged  time.Duration
	Invariants []Invariant
}

// OK reports whether the run converged and every invariant held.
func (r *Report) OK() bool { return r.Converged >= 0 && allPass(r.Invariants) }

// Print writes the report as tables to out, in one write, and into report.txt in the run's
// directory, so a kept directory tells what a run found.
func (r *Report) Print(out io.Writer) error {
	text := r.String()
	_, _ = io.WriteString(out, text)
	return os.WriteFile(filepath.Join(r.Config.Dir, "report.txt"), []byte(text), 0o644)
}

// Failed returns the invariants that did not hold.
func (r *Report) Failed() []Invariant {
	var failed []Invariant
	for _, inv := range r.Invariants {
		if !inv.Pass {
			failed = append(failed, inv)
		}
	}
	return failed
}

// String is the report as tables.
func (r *Report) String() string {
	var w bytes.Buffer
	fmt.Fprintf(&w, "\nSEED      %d (reproduce: go run ./scripts/cmd/faults%s -seed %d)\n", r.Config.Seed, r.Config.form(), r.Config.Seed)
	fmt.Fprintf(&w, "WORKLOAD  %s\n\n", r.Workload)
	tw := tabwriter.NewWriter(&w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tINJECTED\tJETSTREAM RECOVERED AFTER (each)")
	total := 0
	for _, kind := range FaultKinds(r.Config) {
		recovered := "-"
		if ds := r.Recovered[kind]; len(ds) > 0 {
			var each []string
			for _, d := range ds {
				each = append(each, d.Round(100*time.Millisecond).String())
			}
			recovered = strings.Join(each, " ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", kind, r.Faults[kind], recovered)
		total += r.Faults[kind]
	}
	fmt.Fprintf(tw, "total\t%d\t\n", total)
	_ = tw.Flush()
	if r.Converged >= 0 {
		fmt.Fprintf(&w, "\nCONVERGED  %s after the last fault\n\n", r.Converged.Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(&w, "\nCONVERGED  never, within %s\n\n", r.Config.Converge)
	}
	fmt.Fprintln(tw, "INVARIANT\tRESULT\tOBSERVED\tDETAIL")
	for _, inv := range r.Invariants {
		result := "PASS"
		if !inv.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", inv.Name, result, inv.Observed, inv.Detail)
	}
	_ = tw.Flush()
	return w.String()
}
