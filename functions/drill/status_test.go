package drill

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// How Run's answer becomes an entry's result: the outcome, what is kept of a success, and
// the reason and object of a failure.
func TestReport(t *testing.T) {
	const (
		entry = "shoot--dev--app--6f1c"
		delta = "shoot--dev--app--6f1c/etcd-main/v2/Incr-00000201-00000300-1700000000.gz"
	)
	start := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	point := time.Date(2026, 11, 27, 2, 55, 0, 0, time.UTC)
	restored := Result{Prefix: entry + "/etcd-main/", NewestPoint: point, Revision: 300, FullRevision: 200, Keys: 1234,
		KVSHA256: strings.Repeat("ab", 32), DBSize: 8 << 20, Duration: 42 * time.Second}
	partial := Result{Prefix: entry + "/etcd-main/", NewestPoint: point, Duration: 3 * time.Second}
	gap := &Error{Err: ErrRevisionGap, Kind: "delta", Key: delta, Detail: "revisions 201..300 do not follow 150"}
	long := &Error{Err: ErrCorrupt, Kind: "delta", Key: delta, Detail: strings.Repeat("é", 600)}
	// with is restored with the live etcd's comparison l.
	with := func(l Live) Result {
		r := restored
		r.Live = &l
		return r
	}
	// withReal is with(l) and etcd-backup-restore's restore rr.
	withReal := func(l Live, rr RealRestore) Result {
		r := with(l)
		r.RealRestore = &rr
		return r
	}
	success := func(outcome string, live *backupv1alpha1.LiveComparison) backupv1alpha1.EntryDrillResult {
		return backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: outcome,
			Duration: metav1.Duration{Duration: 42 * time.Second}, RestoredRevision: 300, NewestRestorablePoint: &metav1.Time{Time: point},
			Keys: 1234, Bytes: 8 << 20, Hash: strings.Repeat("ab", 32), Live: live}
	}
	// withSummary is r with rr's summary.
	withSummary := func(r backupv1alpha1.EntryDrillResult, rr RealRestore) backupv1alpha1.EntryDrillResult {
		r.RealRestore = kube.Truncate(rr.Summary(), backupv1alpha1.MaxEntryDrillReasonLength)
		return r
	}
	matches := Live{Outcome: backupv1alpha1.LiveMatches, Revision: 320, BehindRevisions: 20, BehindSeconds: 300, HashKV: 7, OurHashKV: 7, Reason: "HashKV"}
	matchesStatus := &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveMatches, Revision: 320, BehindRevisions: 20, BehindSeconds: 300, Reason: "HashKV"}
	agrees := RealRestore{Outcome: RealRestoreAgrees, Tool: "etcd-backup-restore v0.44.1", Revision: 300, Keys: 1234, Agrees: true}
	disagrees := RealRestore{Outcome: RealRestoreDiffers, Tool: "etcd-backup-restore v0.44.1", Revision: 300, Keys: 1233, Missing: []string{"/registry/a"}}
	noEtcdbrctl := RealRestore{Outcome: RealRestoreNotRun, NotRun: "no etcdbrctl configured"}
	notApplicable := RealRestore{Outcome: RealRestoreNotApplicable, NotRun: "the snapshot function's backups are not in etcd-backup-restore's layout"}
	const compacted = "the live etcd has compacted past revision 300"
	differs := Live{Outcome: backupv1alpha1.LiveDiffers, Revision: 310, BehindRevisions: 10, BehindSeconds: 300, Changed: []string{"/registry/a"},
		Reason: "at revision 300 it holds 1 key with another value or mod revision: /registry/a"}
	for _, tc := range []struct {
		name   string
		entry  string
		res    Result
		err    error
		want   backupv1alpha1.EntryDrillResult
		reason string // the reason starts with it
	}{
		{name: "restored", entry: entry, res: restored,
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeRestorable,
				Duration: metav1.Duration{Duration: 42 * time.Second}, RestoredRevision: 300, NewestRestorablePoint: &metav1.Time{Time: point},
				Keys: 1234, Bytes: 8 << 20, Hash: strings.Repeat("ab", 32)}},
		{name: "the live etcd matches and etcd-backup-restore's restore agrees: Exact", entry: entry,
			res: withReal(matches, agrees), want: withSummary(success(backupv1alpha1.OutcomeExact, matchesStatus), agrees)},
		{name: "the live etcd matches, etcd-backup-restore's restore not run: Restorable, the reason says why", entry: entry,
			res: withReal(matches, noEtcdbrctl), want: withSummary(success(backupv1alpha1.OutcomeRestorable, matchesStatus), noEtcdbrctl),
			reason: "the live etcd matched, but etcd-backup-restore's restore was not run: no etcdbrctl configured"},
		{name: "the live etcd matches, without a word of etcd-backup-restore's restore: Restorable", entry: entry,
			res: with(matches), want: success(backupv1alpha1.OutcomeRestorable, matchesStatus),
			reason: "the live etcd matched, but etcd-backup-restore's restore was not run"},
		{name: "the live etcd matches, etcd-backup-restore's restore not run for a long reason: cut", entry: entry,
			res:    withReal(matches, RealRestore{Outcome: RealRestoreNotRun, NotRun: strings.Repeat("é", 600)}),
			want:   withSummary(success(backupv1alpha1.OutcomeRestorable, matchesStatus), RealRestore{Outcome: RealRestoreNotRun, NotRun: strings.Repeat("é", 600)}),
			reason: "the live etcd matched, but etcd-backup-restore's restore was not run: éé"},
		{name: "an EtcdBackupConfig's backups, which etcd-backup-restore does not read, match the live etcd: Exact", entry: entry,
			res: withReal(matches, notApplicable), want: withSummary(success(backupv1alpha1.OutcomeExact, matchesStatus), notApplicable)},
		{name: "etcd-backup-restore's restore differs: the backup is at fault", entry: entry, res: withReal(matches, disagrees),
			err: &Error{Err: ErrRealRestoreDiffers, Detail: "etcd-backup-restore v0.44.1 restores revision 300 without 1 key that the backups hold: /registry/a"},
			want: withSummary(backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable,
				Duration: metav1.Duration{Duration: 42 * time.Second}, Live: matchesStatus}, disagrees),
			reason: "the real restore differs: etcd-backup-restore v0.44.1 restores revision 300 without 1 key"},
		{name: "the live etcd compacted past the revision: Unverified, with its reason", entry: entry,
			res: with(Live{Outcome: backupv1alpha1.LiveCompacted, Revision: 900, BehindRevisions: 600, BehindSeconds: 7200, Reason: compacted}),
			want: success(backupv1alpha1.OutcomeUnverified, &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveCompacted, Revision: 900,
				BehindRevisions: 600, BehindSeconds: 7200, Reason: compacted}),
			reason: compacted},
		{name: "the live etcd unreachable: Restorable, the live field says why", entry: entry,
			res: with(Live{Outcome: backupv1alpha1.LiveUnreachable, BehindSeconds: 300, Reason: "the live etcd is not reachable: refused"}),
			want: success(backupv1alpha1.OutcomeRestorable, &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveUnreachable,
				BehindSeconds: 300, Reason: "the live etcd is not reachable: refused"})},
		{name: "no live etcd: Restorable, the live field says so", entry: entry,
			res: with(Live{Outcome: backupv1alpha1.LiveNotConfigured, BehindSeconds: 300, Reason: "none"}),
			want: success(backupv1alpha1.OutcomeRestorable, &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveNotConfigured,
				BehindSeconds: 300, Reason: "none"})},
		{name: "the live etcd differs: the backup is at fault", entry: entry, res: with(differs), err: differs.err(),
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable,
				Duration: metav1.Duration{Duration: 42 * time.Second}, Live: &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveDiffers,
					Revision: 310, BehindRevisions: 10, BehindSeconds: 300, Reason: differs.Reason}},
			reason: "the live etcd differs: at revision 300 it holds 1 key with another value or mod revision: /registry/a"},
		{name: "a revision gap: the backup is at fault", entry: entry, res: partial, err: gap,
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable,
				Duration: metav1.Duration{Duration: 3 * time.Second}, Object: delta},
			reason: "delta " + delta + ": revision gap: revisions 201..300"},
		{name: "no full snapshot: at fault, about no one object", entry: entry, err: &Error{Err: ErrNoFullSnapshot, Detail: `under "x/"`},
			want:   backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable},
			reason: "no full snapshot"},
		{name: "the store unreachable: no verdict", entry: entry, res: partial,
			err: &Error{Err: ErrSource, Kind: "delta", Key: delta, Detail: "opening it", Cause: errors.New("connection refused")},
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeError,
				Duration: metav1.Duration{Duration: 3 * time.Second}, Object: delta},
			reason: "delta " + delta + ": reading the source: opening it: connection refused"},
		{name: "the timeout, as Run reports it: no verdict", entry: entry,
			err:  &Error{Err: ErrDrill, Kind: "delta", Key: delta, Detail: "reading it", Cause: context.DeadlineExceeded},
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeError, Object: delta}},
		{name: "a caller's check: no verdict on the backup", entry: entry, err: &Error{Err: ErrCheck, Detail: "the store restored up to it"},
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeError}},
		{name: "an error not of the drill's", entry: entry, err: fmt.Errorf("opening the bucket: %w", context.Canceled),
			want:   backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeError},
			reason: "opening the bucket: context canceled"},
		{name: "a reason cut to the API's bound", entry: entry, err: long,
			want: backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable, Object: delta}},
		{name: "a migration's source- entry names its shoot too", entry: "source-" + entry, res: restored,
			want: backupv1alpha1.EntryDrillResult{Entry: "source-" + entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeRestorable,
				Duration: metav1.Duration{Duration: 42 * time.Second}, RestoredRevision: 300, NewestRestorablePoint: &metav1.Time{Time: point},
				Keys: 1234, Bytes: 8 << 20, Hash: strings.Repeat("ab", 32)}},
		{name: "a name that is not Gardener's names no shoot", entry: "etcd-backups", res: restored,
			want: backupv1alpha1.EntryDrillResult{Entry: "etcd-backups", Outcome: backupv1alpha1.OutcomeRestorable,
				Duration: metav1.Duration{Duration: 42 * time.Second}, RestoredRevision: 300, NewestRestorablePoint: &metav1.Time{Time: point},
				Keys: 1234, Bytes: 8 << 20, Hash: strings.Repeat("ab", 32)}},
		{name: "a namespace too long to be one names no shoot", entry: strings.Repeat("n", 64) + "--6f1c", err: gap,
			want: backupv1alpha1.EntryDrillResult{Entry: strings.Repeat("n", 64) + "--6f1c", Outcome: backupv1alpha1.OutcomeNotRestorable, Object: delta}},
	} {
		got := Report(tc.entry, start, tc.res, tc.err)
		if n := utf8.RuneCountInString(got.Reason); n > backupv1alpha1.MaxEntryDrillReasonLength {
			t.Errorf("%s: a reason of %d characters, more than the API's %d", tc.name, n, backupv1alpha1.MaxEntryDrillReasonLength)
		}
		if tc.err != nil && !strings.HasPrefix(tc.err.Error(), strings.TrimSuffix(got.Reason, "…")) {
			t.Errorf("%s: reason %q, not the start of %q", tc.name, got.Reason, tc.err)
		}
		if !strings.HasPrefix(got.Reason, tc.reason) {
			t.Errorf("%s: reason %q, want it to start with %q", tc.name, got.Reason, tc.reason)
		}
		if (tc.err == nil && tc.reason == "") != (got.Reason == "") {
			t.Errorf("%s: reason %q for error %v", tc.name, got.Reason, tc.err)
		}
		tc.want.Time = metav1.NewTime(start)
		got.Reason = ""
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// How a run's reports land in the status, row by row: what is kept, dropped, carried over, in
// which order, and the counts.
func TestRecord(t *testing.T) {
	run := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	const maxAge = 24 * time.Hour
	const (
		ok         = backupv1alpha1.OutcomeRestorable
		exact      = backupv1alpha1.OutcomeExact
		unverified = backupv1alpha1.OutcomeUnverified
		broken     = backupv1alpha1.OutcomeNotRestorable
		failed     = backupv1alpha1.OutcomeError
	)
	// result is entry's drill at run+at, restored to a point age before run (none when age < 0).
	result := func(entry, outcome string, at, age time.Duration) backupv1alpha1.EntryDrillResult {
		r := backupv1alpha1.EntryDrillResult{Entry: entry, Outcome: outcome, Time: metav1.NewTime(run.Add(at))}
		if age >= 0 {
			r.NewestRestorablePoint = &metav1.Time{Time: run.Add(-age)}
		}
		return r
	}
	const none = -1
	type counts struct{ entries, restorable, failed, stale int32 }
	for _, tc := range []struct {
		name     string
		prior    []backupv1alpha1.EntryDrillResult
		reports  []backupv1alpha1.EntryDrillResult
		selected []string
		want     []string // the results' entries, in order
		counts   counts
		points   map[string]time.Duration // an entry's NewestRestorablePoint, as its age at run
	}{
		{name: "first run: failures first, NotRestorable before Error, then successes oldest first",
			reports: []backupv1alpha1.EntryDrillResult{
				result("a", ok, 3*time.Minute, time.Hour), result("b", broken, 2*time.Minute, none),
				result("c", failed, 0, none), result("d", ok, time.Minute, time.Hour), result("e", broken, time.Minute, none)},
			selected: []string{"a", "b", "c", "d", "e"},
			want:     []string{"e", "b", "c", "d", "a"},
			counts:   counts{entries: 5, restorable: 2, failed: 3, stale: 3}},
		{name: "Exact passes as Restorable does; Unverified fails after Error, keeping the point it restored",
			prior: []backupv1alpha1.EntryDrillResult{result("u", ok, -time.Hour, 2*time.Hour)},
			reports: []backupv1alpha1.EntryDrillResult{
				result("x", exact, 0, time.Minute), result("u", unverified, time.Minute, 5*time.Minute), result("r", ok, 2*time.Minute, time.Minute),
				result("e", failed, 3*time.Minute, none)},
			selected: []string{"e", "r", "u", "x"},
			want:     []string{"e", "u", "x", "r"},
			counts:   counts{entries: 4, restorable: 2, failed: 2, stale: 1},
			points:   map[string]time.Duration{"u": 5 * time.Minute, "x": time.Minute}},
		{name: "the same time: by name",
			reports:  []backupv1alpha1.EntryDrillResult{result("b", ok, 0, 0), result("a", ok, 0, 0), result("c", ok, 0, 0)},
			selected: []string{"c", "b", "a"},
			want:     []string{"a", "b", "c"},
			counts:   counts{entries: 3, restorable: 3}},
		{name: "an entry not drilled this run keeps its last result",
			prior:    []backupv1alpha1.EntryDrillResult{result("a", ok, -24*time.Hour, 25*time.Hour), result("b", ok, -24*time.Hour, 25*time.Hour)},
			reports:  []backupv1alpha1.EntryDrillResult{result("b", ok, 0, time.Minute)},
			selected: []string{"a", "b"},
			want:     []string{"a", "b"},
			counts:   counts{entries: 2, restorable: 2, stale: 1},
			points:   map[string]time.Duration{"a": 25 * time.Hour, "b": time.Minute}},
		{name: "an entry gone or no longer selected is dropped",
			prior:    []backupv1alpha1.EntryDrillResult{result("gone", broken, -time.Hour, none), result("b", ok, -time.Hour, time.Hour)},
			reports:  []backupv1alpha1.EntryDrillResult{result("b", ok, 0, time.Minute), result("unselected-since", broken, 0, none)},
			selected: []string{"b"},
			want:     []string{"b"},
			counts:   counts{entries: 1, restorable: 1}},
		{name: "a failed drill keeps the last restorable point: stale once it is maxAge old",
			prior:    []backupv1alpha1.EntryDrillResult{result("a", ok, -time.Hour, 2*time.Hour), result("b", ok, -24*time.Hour, 25*time.Hour)},
			reports:  []backupv1alpha1.EntryDrillResult{result("a", broken, 0, none), result("b", failed, 0, none)},
			selected: []string{"a", "b"},
			want:     []string{"a", "b"},
			counts:   counts{entries: 2, failed: 2, stale: 1},
			points:   map[string]time.Duration{"a": 2 * time.Hour, "b": 25 * time.Hour}},
		{name: "a success replaces the point",
			prior:    []backupv1alpha1.EntryDrillResult{result("a", broken, -time.Hour, 30*time.Hour)},
			reports:  []backupv1alpha1.EntryDrillResult{result("a", ok, 0, 5*time.Minute)},
			selected: []string{"a"},
			want:     []string{"a"},
			counts:   counts{entries: 1, restorable: 1},
			points:   map[string]time.Duration{"a": 5 * time.Minute}},
		{name: "restorable, but backups that stopped are stale",
			reports:  []backupv1alpha1.EntryDrillResult{result("a", ok, 0, 24*time.Hour+time.Second), result("b", ok, 0, 24*time.Hour)},
			selected: []string{"a", "b"},
			want:     []string{"a", "b"},
			counts:   counts{entries: 2, restorable: 2, stale: 1}},
		{name: "an entry never drilled: counted, stale, without a result",
			reports:  []backupv1alpha1.EntryDrillResult{result("a", ok, 0, time.Minute)},
			selected: []string{"a", "new"},
			want:     []string{"a"},
			counts:   counts{entries: 2, restorable: 1, stale: 1}},
		{name: "an entry selected twice counts once",
			reports:  []backupv1alpha1.EntryDrillResult{result("a", ok, 0, time.Minute)},
			selected: []string{"a", "a"},
			want:     []string{"a"},
			counts:   counts{entries: 1, restorable: 1}},
		{name: "nothing selected: an empty status",
			prior:  []backupv1alpha1.EntryDrillResult{result("a", ok, -time.Hour, time.Hour)},
			counts: counts{}},
	} {
		status := backupv1alpha1.RestoreDrillStatus{Results: tc.prior, Stale: 7}
		Record(&status, run, tc.reports, tc.selected, maxAge)
		var got []string
		for _, r := range status.Results {
			got = append(got, r.Entry)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: results %q, want %q", tc.name, got, tc.want)
		}
		if c := (counts{status.Entries, status.Restorable, status.Failed, status.Stale}); c != tc.counts {
			t.Errorf("%s: counts %+v, want %+v", tc.name, c, tc.counts)
		}
		if status.LastRun == nil || !status.LastRun.Time.Equal(run) {
			t.Errorf("%s: lastRun %v, want %s", tc.name, status.LastRun, run)
		}
		for _, r := range status.Results {
			age, ok := tc.points[r.Entry]
			if !ok {
				continue
			}
			if r.NewestRestorablePoint == nil || run.Sub(r.NewestRestorablePoint.Time) != age {
				t.Errorf("%s: %s's newest restorable point %v, want %s before the run", tc.name, r.Entry, r.NewestRestorablePoint, age)
			}
		}
	}
}

// The bound: failures all kept, then the successes drilled longest ago; the counts have all.
func TestRecordBound(t *testing.T) {
	run := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	var reports []backupv1alpha1.EntryDrillResult
	var selected []string
	for i := range 250 {
		r := backupv1alpha1.EntryDrillResult{Entry: fmt.Sprintf("shoot--p--s%03d--uid", i), Outcome: backupv1alpha1.OutcomeRestorable,
			Time: metav1.NewTime(run.Add(time.Duration(250-i) * time.Second)), NewestRestorablePoint: &metav1.Time{Time: run}}
		if i%5 == 0 {
			r.Outcome, r.NewestRestorablePoint = backupv1alpha1.OutcomeNotRestorable, nil
		}
		reports = append(reports, r)
		selected = append(selected, r.Entry)
	}
	var status backupv1alpha1.RestoreDrillStatus
	Record(&status, run, reports, selected, time.Hour)
	if len(status.Results) != backupv1alpha1.MaxEntryDrillResults {
		t.Fatalf("%d results, want the bound %d", len(status.Results), backupv1alpha1.MaxEntryDrillResults)
	}
	if status.Entries != 250 || status.Failed != 50 || status.Restorable != 200 || status.Stale != 50 {
		t.Errorf("counts entries %d, failed %d, restorable %d, stale %d; want 250, 50, 200, 50", status.Entries, status.Failed, status.Restorable, status.Stale)
	}
	for i, r := range status.Results {
		if failure := r.Outcome != backupv1alpha1.OutcomeRestorable; failure != (i < 50) {
			t.Fatalf("result %d is %s: want the 50 failures first", i, r.Outcome)
		}
		if i > 0 && i != 50 && r.Time.Before(&status.Results[i-1].Time) {
			t.Fatalf("result %d (%s) was drilled before result %d: want oldest first", i, r.Entry, i-1)
		}
	}
	// The 150 successes kept are those drilled first: the highest-numbered entries.
	if last := status.Results[len(status.Results)-1].Entry; last != "shoot--p--s063--uid" {
		t.Errorf("the last success kept is %s, want shoot--p--s063--uid", last)
	}
}

// How the drill of the copy joins the bucket's (source Both): a pass at the same revision and
// hash, a difference, a lag, a copy ahead, and a copy's failure that gives the entry its
// outcome.
func TestWithCopy(t *testing.T) {
	point := metav1.NewTime(time.Date(2026, 11, 27, 2, 55, 0, 0, time.UTC))
	hash, other := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	restored := func(outcome string, revision, keys int64, hash string) backupv1alpha1.EntryDrillResult {
		return backupv1alpha1.EntryDrillResult{Entry: "e", Outcome: outcome, RestoredRevision: revision, Keys: keys, Hash: hash, NewestRestorablePoint: &point}
	}
	bucket := restored(backupv1alpha1.OutcomeExact, 300, 12, hash)
	failed := func(outcome, reason, object string) backupv1alpha1.EntryDrillResult {
		return backupv1alpha1.EntryDrillResult{Entry: "e", Source: "copy/p", Outcome: outcome, Reason: reason, Object: object}
	}
	copied := func(r backupv1alpha1.EntryDrillResult) backupv1alpha1.EntryDrillResult {
		r.Source = "copy/p"
		return r
	}
	for _, tc := range []struct {
		name                 string
		bucket, copied       backupv1alpha1.EntryDrillResult
		outcome, reason, obj string
		behind               int64
		copyReason           string
	}{
		{name: "the same store", bucket: bucket, copied: copied(restored(backupv1alpha1.OutcomeExact, 300, 12, hash)), outcome: backupv1alpha1.OutcomeExact},
		{name: "other keys and values", bucket: bucket, copied: copied(restored(backupv1alpha1.OutcomeRestorable, 300, 12, other)),
			outcome:    backupv1alpha1.OutcomeNotRestorable,
			reason:     "copy/p differs from the bucket: at revision 300 the copy restores 12 keys, sha256:" + other + "; the bucket 12 keys, sha256:" + hash,
			copyReason: "at revision 300 the copy restores 12 keys, sha256:" + other + "; the bucket 12 keys, sha256:" + hash},
		{name: "other keys", bucket: bucket, copied: copied(restored(backupv1alpha1.OutcomeExact, 300, 11, hash)), outcome: backupv1alpha1.OutcomeNotRestorable,
			reason:     "copy/p differs from the bucket: at revision 300 the copy restores 11 keys, sha256:" + hash + "; the bucket 12 keys, sha256:" + hash,
			copyReason: "at revision 300 the copy restores 11 keys, sha256:" + hash + "; the bucket 12 keys, sha256:" + hash},
		{name: "a lag", bucket: bucket, copied: copied(restored(backupv1alpha1.OutcomeExact, 250, 10, other)), outcome: backupv1alpha1.OutcomeExact, behind: 50,
			copyReason: "the copy restores revision 250, 50 behind the bucket's 300: its newest snapshot is older (a lag, not compared)"},
		{name: "ahead", bucket: bucket, copied: copied(restored(backupv1alpha1.OutcomeExact, 310, 10, other)), outcome: backupv1alpha1.OutcomeExact,
			copyReason: "the copy restores revision 310, ahead of the bucket's 300: the bucket lacks snapshots the copy holds (not compared)"},
		{name: "the copy does not restore", bucket: bucket, copied: failed(backupv1alpha1.OutcomeNotRestorable, "checksum mismatch", "e/etcd-main/v2/Incr-1"),
			outcome: backupv1alpha1.OutcomeNotRestorable, reason: "copy/p: checksum mismatch", obj: "e/etcd-main/v2/Incr-1", copyReason: "checksum mismatch"},
		{name: "no copy", bucket: bucket, copied: failed(backupv1alpha1.OutcomeError, "no copy of the entry: BackupCopyPolicy p does not exist", ""),
			outcome: backupv1alpha1.OutcomeError, reason: "copy/p: no copy of the entry: BackupCopyPolicy p does not exist",
			copyReason: "no copy of the entry: BackupCopyPolicy p does not exist"},
		{name: "the bucket does not restore, the copy does", bucket: failed(backupv1alpha1.OutcomeNotRestorable, "truncated", "e/full"),
			copied: copied(restored(backupv1alpha1.OutcomeExact, 300, 12, hash)), outcome: backupv1alpha1.OutcomeNotRestorable, reason: "truncated", obj: "e/full"},
	} {
		r := WithCopy(tc.bucket, tc.copied)
		if r.Outcome != tc.outcome || r.Reason != tc.reason || r.Object != tc.obj {
			t.Errorf("%s: %s, %q, object %q; want %s, %q, %q", tc.name, r.Outcome, r.Reason, r.Object, tc.outcome, tc.reason, tc.obj)
		}
		c := r.Copy
		if c == nil || c.Source != "copy/p" || c.Outcome != tc.copied.Outcome || c.BehindRevisions != tc.behind || c.Reason != tc.copyReason ||
			c.RestoredRevision != tc.copied.RestoredRevision || c.Hash != tc.copied.Hash {
			t.Errorf("%s: copy %+v, want %s, %d behind, reason %q", tc.name, c, tc.copied.Outcome, tc.behind, tc.copyReason)
		}
	}
}
