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
	// every leader elected (the stream's and each function's consumer's); after every
	// nats-server's restart for the outage of them all.
	Recovered map[string][]time.Duration
	// Outages are the dependency outages, with how soon after each return its work was done.
	Outages []Outage
	// Converged is the time from the last fault until every invariant held; -1 if never.
	Converged  time.Duration
	Invariants []Invariant
}

// Outage is one dependency outage and the work it held up: the deletions due by the return
// that were not done when it began.
type Outage struct {
	Kind   string
	From   time.Time
	Lasted time.Duration
	// DueDuring counts the purges that came due while the dependency was away.
	DueDuring int
	// Purges and Releases count the prefixes to empty and the objects to release; LastPurged
	// and LastReleased are the times from the return to the last of each done (negative: all
	// before the return); Undone counts those not done within a minute of the return.
	Purges, Releases         int
	LastPurged, LastReleased time.Duration
	Undone                   int
}

func outagesOf(s purgeStats) []Outage {
	var out []Outage
	for _, o := range s.outages {
		out = append(out, Outage{
			Kind: o.kind, From: o.from, Lasted: o.to.Sub(o.from), DueDuring: o.dueDuring,
			Purges: o.purged.n, Releases: o.released.n, LastPurged: o.purged.last, LastReleased: o.released.last,
			Undone: len(o.purged.late) + len(o.purged.pending) + len(o.released.late) + len(o.released.pending),
		})
	}
	return out
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
	if len(r.Outages) > 0 {
		fmt.Fprintln(&w)
		fmt.Fprintln(tw, "OUTAGE\tFROM\tLASTED\tPURGES DUE DURING\tPURGES HELD UP\tLAST PURGED AFTER RETURN\tENTRIES HELD UP\tLAST RELEASED AFTER RETURN\tNOT DONE IN 1 MIN")
		after := func(n int, d time.Duration) string {
			if n == 0 {
				return "-"
			}
			return d.Round(100 * time.Millisecond).String()
		}
		for _, o := range r.Outages {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%d\n", o.Kind, o.From.Format(time.TimeOnly), o.Lasted.Round(100*time.Millisecond),
				o.DueDuring, o.Purges, after(o.Purges, o.LastPurged), o.Releases, after(o.Releases, o.LastReleased), o.Undone)
		}
		_ = tw.Flush()
	}
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
