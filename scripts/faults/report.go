package faults

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Report is what a run found.
type Report struct {
	Config   Config
	Workload string
	Faults   map[string]int
	// Converged is the time from the last fault until every invariant held; -1 if never.
	Converged  time.Duration
	Invariants []Invariant
}

// OK reports whether the run converged and every invariant held.
func (r *Report) OK() bool { return r.Converged >= 0 && allPass(r.Invariants) }

// Print writes the report as tables, in one write.
func (r *Report) Print(out io.Writer) {
	var w bytes.Buffer
	defer func() { _, _ = out.Write(w.Bytes()) }()
	fmt.Fprintf(&w, "\nWORKLOAD  %s\n\n", r.Workload)
	tw := tabwriter.NewWriter(&w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tINJECTED")
	total := 0
	for _, kind := range faultKinds {
		fmt.Fprintf(tw, "%s\t%d\n", kind, r.Faults[kind])
		total += r.Faults[kind]
	}
	fmt.Fprintf(tw, "total\t%d\n", total)
	_ = tw.Flush()
	if r.Converged >= 0 {
		fmt.Fprintf(&w, "\nCONVERGED  %s after the last fault\n\n", r.Converged.Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(&w, "\nCONVERGED  never, within %s\n\n", r.Config.Converge)
	}
	fmt.Fprintln(tw, "INVARIANT\tRESULT\tDETAIL")
	for _, inv := range r.Invariants {
		result := "PASS"
		if !inv.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", inv.Name, result, inv.Detail)
	}
	_ = tw.Flush()
}
