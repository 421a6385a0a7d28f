package drill

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// Report is the drill of the BackupEntry named entry, started at start, as a RestoreDrill's
// status records it: res and err as Run returned them. A drill that restored is Exact where the
// live etcd matched (Result.Live) and the restore that runs on the day restored the same store:
// etcd-backup-restore's, which must have run and agreed (Result.RealRestore), or, for backups it
// does not read (RealRestoreNotApplicable: the snapshot function's full snapshots), etcdutl's
// snapshot restore, which the replay runs. Matched without etcd-backup-restore's restore, it is
// Restorable, the reason saying why that did not run. Unverified where the live etcd had
// compacted past the restored revision, else Restorable. A failure the backup is at fault for
// (Error.AboutTheBackup: a live etcd that differs, etcd-backup-restore's restore that differs or
// fails, too) is NotRestorable; any other — the store unreachable, the drill's own etcd, its
// timeout, a caller's check — is Error: the drill could not judge.
func Report(entry string, start time.Time, res Result, err error) backupv1alpha1.EntryDrillResult {
	r := backupv1alpha1.EntryDrillResult{
		Entry:    entry,
		Shoot:    shootOf(entry),
		Outcome:  backupv1alpha1.OutcomeRestorable,
		Time:     metav1.NewTime(start),
		Duration: metav1.Duration{Duration: res.Duration},
		Live:     liveStatus(res.Live),
	}
	r.RealRestore = kube.Truncate(res.RealRestore.Summary(), backupv1alpha1.MaxEntryDrillReasonLength)
	if err == nil {
		point := metav1.NewTime(res.NewestPoint)
		r.RestoredRevision, r.NewestRestorablePoint = res.Revision, &point
		r.Keys, r.Bytes, r.Hash = res.Keys, res.DBSize, res.KVSHA256
		switch {
		case r.Live == nil:
		case r.Live.Outcome == backupv1alpha1.LiveMatches && realRestoreAgreed(res.RealRestore):
			r.Outcome = backupv1alpha1.OutcomeExact
		case r.Live.Outcome == backupv1alpha1.LiveMatches:
			why := "etcd-backup-restore's restore was not run"
			if res.RealRestore != nil && res.RealRestore.NotRun != "" {
				why += ": " + res.RealRestore.NotRun
			}
			r.Reason = kube.Truncate("the live etcd matched, but "+why, backupv1alpha1.MaxEntryDrillReasonLength)
		case r.Live.Outcome == backupv1alpha1.LiveCompacted:
			r.Outcome, r.Reason = backupv1alpha1.OutcomeUnverified, r.Live.Reason
		}
		if n := len(res.OverlappingDeltas); n > 0 {
			note := fmt.Sprintf("overlapping deltas (two leaders wrote them): %d; their shared events agree and were applied once", n)
			if r.Reason != "" {
				note = r.Reason + "; " + note
			}
			r.Reason = kube.Truncate(note, backupv1alpha1.MaxEntryDrillReasonLength)
		}
		return r
	}
	r.Outcome = backupv1alpha1.OutcomeError
	r.Reason = kube.Truncate(err.Error(), backupv1alpha1.MaxEntryDrillReasonLength)
	var derr *Error
	if errors.As(err, &derr) {
		if derr.AboutTheBackup() {
			r.Outcome = backupv1alpha1.OutcomeNotRestorable
		}
		r.Object = kube.Truncate(derr.Key, backupv1alpha1.MaxEntryDrillObjectLength)
	}
	return r
}

// realRestoreAgreed says whether the restore that runs on the day restored what the replay did:
// etcd-backup-restore's agreed, or it does not apply and the replay ran that restore itself.
func realRestoreAgreed(rr *RealRestore) bool {
	return rr != nil && (rr.Outcome == RealRestoreAgrees || rr.Outcome == RealRestoreNotApplicable)
}

// WithCopy is the result of a BackupEntry drilled in its bucket (bucket) and then in the copy a
// BackupCopyPolicy keeps (copied, whose Source names it), as spec.source Both records it: the
// bucket's result with the copy's beside it (Copy). Where both restored, the copy restored at
// the bucket's revision must hold the same keys and values (key count and SHA-256), else the
// entry is NotRestorable, the reason naming the copy; at an older revision the copy lags behind
// the bucket (Copy.BehindRevisions), which is not a failure: nothing is compared, the two
// stores being at different revisions. A copy whose own drill did worse than the bucket's
// (NotRestorable, Error, Unverified) gives the entry its outcome, reason and object.
func WithCopy(bucket, copied backupv1alpha1.EntryDrillResult) backupv1alpha1.EntryDrillResult {
	r := bucket
	c := &backupv1alpha1.CopyDrillResult{Source: copied.Source, Outcome: copied.Outcome, RestoredRevision: copied.RestoredRevision,
		NewestRestorablePoint: copied.NewestRestorablePoint, Keys: copied.Keys, Hash: copied.Hash, Reason: copied.Reason, Object: copied.Object}
	r.Copy = c
	if outcomeRank[copied.Outcome] < outcomeRank[bucket.Outcome] {
		r.Outcome, r.Object = copied.Outcome, copied.Object
		r.Reason = kube.Truncate(copied.Source+": "+copied.Reason, backupv1alpha1.MaxEntryDrillReasonLength)
		return r
	}
	if bucket.NewestRestorablePoint == nil || c.NewestRestorablePoint == nil || bucket.RestoredRevision == 0 {
		return r // one of them did not restore: nothing to compare
	}
	switch {
	case c.RestoredRevision < bucket.RestoredRevision:
		c.BehindRevisions = bucket.RestoredRevision - c.RestoredRevision
		c.Reason = kube.Truncate(fmt.Sprintf("the copy restores revision %d, %d behind the bucket's %d: its newest snapshot is older (a lag, not compared)",
			c.RestoredRevision, c.BehindRevisions, bucket.RestoredRevision), backupv1alpha1.MaxEntryDrillReasonLength)
	case c.RestoredRevision > bucket.RestoredRevision:
		c.Reason = fmt.Sprintf("the copy restores revision %d, ahead of the bucket's %d: the bucket lacks snapshots the copy holds (not compared)",
			c.RestoredRevision, bucket.RestoredRevision)
	case c.Keys != bucket.Keys || c.Hash != bucket.Hash:
		c.Reason = fmt.Sprintf("at revision %d the copy restores %d keys, sha256:%s; the bucket %d keys, sha256:%s",
			c.RestoredRevision, c.Keys, c.Hash, bucket.Keys, bucket.Hash)
		r.Outcome, r.Object = backupv1alpha1.OutcomeNotRestorable, ""
		r.Reason = kube.Truncate(copied.Source+" differs from the bucket: "+c.Reason, backupv1alpha1.MaxEntryDrillReasonLength)
	}
	return r
}

// liveStatus is l as a status records it; nil without one.
func liveStatus(l *Live) *backupv1alpha1.LiveComparison {
	if l == nil {
		return nil
	}
	return &backupv1alpha1.LiveComparison{Outcome: l.Outcome, Revision: l.Revision, BehindRevisions: l.BehindRevisions,
		BehindSeconds: l.BehindSeconds, Reason: kube.Truncate(l.Reason, backupv1alpha1.MaxEntryDrillReasonLength)}
}

// shootOf is the shoot's control-plane namespace where the entry's name is Gardener's
// (<namespace>--<shoot uid>) and the namespace a valid one, else "".
func shootOf(entry string) string {
	if gardener.EntryShootUID(entry) == "" {
		return ""
	}
	if ns := gardener.EntryNamespace(entry); len(ns) <= 63 {
		return ns
	}
	return ""
}

// Record writes a run's reports into status: the run started at run, reports are its drills,
// and selected names the entries the RestoreDrill selects now. An entry not drilled in this run
// keeps its last result; a result of an entry no longer selected (gone, or no longer matching)
// is dropped. A drill that did not restore (NotRestorable, Error) keeps the NewestRestorablePoint
// of the entry's last result, so that an entry whose drills keep failing turns stale once its
// last proven point is maxAge old.
//
// Results are ordered NotRestorable, then Error, then Unverified, then the passes (Restorable,
// Exact), each oldest drill first (then by name), and cut at MaxEntryDrillResults: the newest
// passes are left out first. The counts are over every selected entry, cut or not: Restorable
// counts the passes, Failed the others; Stale counts those without a restorable point at most
// maxAge before run, the never-drilled ones included.
func Record(status *backupv1alpha1.RestoreDrillStatus, run time.Time, reports []backupv1alpha1.EntryDrillResult, selected []string, maxAge time.Duration) {
	last := make(map[string]backupv1alpha1.EntryDrillResult, len(status.Results)+len(reports))
	for _, r := range status.Results {
		last[r.Entry] = r
	}
	for _, r := range reports {
		if prior, ok := last[r.Entry]; ok && !backupv1alpha1.Passed(r.Outcome) && r.Outcome != backupv1alpha1.OutcomeUnverified {
			r.NewestRestorablePoint = prior.NewestRestorablePoint
		}
		last[r.Entry] = r
	}

	names := slices.Compact(slices.Sorted(slices.Values(selected)))
	var results []backupv1alpha1.EntryDrillResult
	var restorable, failed, stale int32
	for _, name := range names {
		r, ok := last[name]
		if !ok || r.NewestRestorablePoint == nil || run.Sub(r.NewestRestorablePoint.Time) > maxAge {
			stale++
		}
		if !ok {
			continue
		}
		if backupv1alpha1.Passed(r.Outcome) {
			restorable++
		} else {
			failed++
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b backupv1alpha1.EntryDrillResult) int {
		return cmp.Or(cmp.Compare(outcomeRank[a.Outcome], outcomeRank[b.Outcome]),
			a.Time.Compare(b.Time.Time), cmp.Compare(a.Entry, b.Entry))
	})

	status.LastRun = &metav1.Time{Time: run}
	status.Entries = int32(len(names))
	status.Restorable, status.Failed, status.Stale = restorable, failed, stale
	status.Results = results[:min(len(results), backupv1alpha1.MaxEntryDrillResults)]
}

// outcomeRank orders results: broken backups first, then drills that could not judge.
var outcomeRank = map[string]int{
	backupv1alpha1.OutcomeNotRestorable: 0,
	backupv1alpha1.OutcomeError:         1,
	backupv1alpha1.OutcomeUnverified:    2,
	backupv1alpha1.OutcomeRestorable:    3,
	backupv1alpha1.OutcomeExact:         3,
}
