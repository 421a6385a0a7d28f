package copy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
)

// Copied is one entry's copy in a run: what Report needs besides the entry's last result.
type Copied struct {
	Entry, Bucket string
	// Created is when the entry was created: how far behind an entry never wholly copied is.
	Created time.Time
	Start   time.Time
	// Report and Err are replica.Copy's; Report is nil when the copy did not start (a store
	// that would not open), and Err says why.
	Report *replica.Report
	Err    error
}

// Report is c as a BackupCopyPolicy's status records it, prior being the entry's last result
// (nil: none). A copy is complete when every object of the entry is in the copy, verified; an
// incomplete one keeps the last complete copy's time, so its lag grows until one completes.
func Report(c Copied, prior *backupv1alpha1.EntryCopyResult) backupv1alpha1.EntryCopyResult {
	r := backupv1alpha1.EntryCopyResult{Entry: c.Entry, Bucket: c.Bucket, Time: metav1.NewTime(c.Start), Complete: c.Err == nil}
	if prior != nil {
		r.Newest, r.LastComplete = prior.Newest, prior.LastComplete
	}
	if rep := c.Report; rep != nil {
		r.Duration = metav1.Duration{Duration: rep.Duration}
		r.Objects, r.Bytes, r.Skipped = int64(rep.Copied), rep.CopiedBytes, int64(rep.Skipped)
		r.Differing, r.FailedObjects = int64(len(rep.Differing)), int64(len(rep.Failed))
		if rep.Newest != "" && (r.Newest == "" || replica.Newer(rep.Newest, r.Newest)) {
			r.Newest = kube.Truncate(rep.Newest, backupv1alpha1.MaxCopyKeyLength)
		}
		r.Failures = failures(rep)
	}
	if r.Complete {
		start := metav1.NewTime(c.Start)
		r.LastComplete = &start
		return r
	}
	since := c.Created
	if r.LastComplete != nil {
		since = r.LastComplete.Time
	}
	r.Lag = metav1.Duration{Duration: max(c.Start.Sub(since), 0).Truncate(time.Second)}
	r.Reason = kube.Truncate(c.Err.Error(), backupv1alpha1.MaxCopyReasonLength)
	return r
}

// failures are the first differing objects, then the first failed ones, up to MaxCopyFailures.
func failures(rep *replica.Report) []backupv1alpha1.CopyFailure {
	var out []backupv1alpha1.CopyFailure
	for _, d := range rep.Differing {
		out = append(out, failure(d.Key, fmt.Sprintf("differs: source %s, copy %s; kept", d.Source, d.Destination)))
	}
	for _, f := range rep.Failed {
		out = append(out, failure(f.Key, f.Err.Error()))
	}
	return out[:min(len(out), backupv1alpha1.MaxCopyFailures)]
}

func failure(key, reason string) backupv1alpha1.CopyFailure {
	return backupv1alpha1.CopyFailure{Key: kube.Truncate(key, backupv1alpha1.MaxCopyKeyLength),
		Reason: kube.Truncate(reason, backupv1alpha1.MaxCopyReasonLength)}
}

// Record writes a run's results into status: the run started at run, results are its copies,
// selected names the entries the policy selects now, objective is its lagObjective. An entry
// not copied in this run keeps its last result; a result of an entry no longer selected is
// dropped. Results are ordered incomplete first, then by lag, furthest behind first (then by
// name), and cut at MaxEntryCopyResults; the counts are over every selected entry with a
// result.
func Record(status *backupv1alpha1.BackupCopyPolicyStatus, run time.Time, results []backupv1alpha1.EntryCopyResult, selected []string, objective time.Duration) {
	last := make(map[string]backupv1alpha1.EntryCopyResult, len(status.Results)+len(results))
	for _, r := range status.Results {
		last[r.Entry] = r
	}
	for _, r := range results {
		last[r.Entry] = r
	}
	names := slices.Compact(slices.Sorted(slices.Values(selected)))
	var kept []backupv1alpha1.EntryCopyResult
	var failed, behind int32
	for _, name := range names {
		r, ok := last[name]
		if !ok {
			continue
		}
		if !r.Complete {
			failed++
		}
		if r.Lag.Duration > objective {
			behind++
		}
		kept = append(kept, r)
	}
	slices.SortFunc(kept, func(a, b backupv1alpha1.EntryCopyResult) int {
		return cmp.Or(compareBool(a.Complete, b.Complete), cmp.Compare(b.Lag.Duration, a.Lag.Duration), cmp.Compare(a.Entry, b.Entry))
	})
	status.LastRun = &metav1.Time{Time: run}
	status.Entries = int32(len(names))
	status.Failed, status.Behind = failed, behind
	status.Results = kept[:min(len(kept), backupv1alpha1.MaxEntryCopyResults)]
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// firstReasons is how many entries a condition's message names.
const firstReasons = 3

// copiesVerdict is the CopiesSucceeded condition of a run's results.
func copiesVerdict(results []backupv1alpha1.EntryCopyResult) (ok bool, reason, message string) {
	if len(results) == 0 {
		return true, backupv1alpha1.ReasonNothingToCopy, "No BackupEntry is selected"
	}
	var failed []string
	for _, r := range results {
		if !r.Complete {
			failed = append(failed, r.Entry+": "+r.Reason)
		}
	}
	if len(failed) == 0 {
		return true, backupv1alpha1.ReasonAllCopied, fmt.Sprintf("All %d entries are in the copy, verified", len(results))
	}
	return false, backupv1alpha1.ReasonCopiesFailed, fmt.Sprintf("%d of %d entries are not wholly in the copy: %s", len(failed), len(results), first(failed))
}

// lagVerdict is the WithinLagObjective condition of a run's results.
func lagVerdict(results []backupv1alpha1.EntryCopyResult, objective time.Duration) (ok bool, reason, message string) {
	var behind []string
	for _, r := range results {
		if r.Lag.Duration > objective {
			behind = append(behind, fmt.Sprintf("%s %s behind", r.Entry, r.Lag.Duration))
		}
	}
	if len(behind) == 0 {
		return true, backupv1alpha1.ReasonWithinObjective, fmt.Sprintf("No entry is more than %s behind", objective)
	}
	return false, backupv1alpha1.ReasonBehindObjective, fmt.Sprintf("%d of %d entries are more than %s behind: %s", len(behind), len(results), objective, first(behind))
}

// first joins the first few of items and counts the rest.
func first(items []string) string {
	s := strings.Join(items[:min(len(items), firstReasons)], "; ")
	if len(items) > firstReasons {
		s += fmt.Sprintf("; and %d more (status.results)", len(items)-firstReasons)
	}
	return s
}
