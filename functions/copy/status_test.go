package copy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
)

// A copy that did not complete keeps the last complete copy's time, its lag grows from it (from
// the entry's creation before any), and the newest object copied never goes back.
func TestReport(t *testing.T) {
	created := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	first := created.Add(time.Hour)
	newest := "e/etcd-main/v2/Incr-00000011-00000020-1764400600.gz"
	failed := Report(Copied{Entry: "e", Created: created, Start: first, Err: errors.New("bucket gone")}, nil)
	if failed.Complete || failed.Lag.Duration != time.Hour || failed.LastComplete != nil || failed.Reason != "bucket gone" {
		t.Errorf("a first copy that failed: %+v", failed)
	}
	done := Report(Copied{Entry: "e", Created: created, Start: first.Add(time.Hour), Report: &replica.Report{Copied: 2, CopiedBytes: 10, Newest: newest}}, &failed)
	if !done.Complete || done.Lag.Duration != 0 || !done.LastComplete.Time.Equal(first.Add(time.Hour)) || done.Newest != newest {
		t.Errorf("a complete copy: %+v", done)
	}
	rep := &replica.Report{Copied: 1, Newest: "e/etcd-main/v2/Incr-00000001-00000010-1764400000.gz",
		Differing: []replica.Difference{{Key: "e/x", Source: replica.Checksum{Size: 1}, Destination: replica.Checksum{Size: 2}}}}
	for i := range backupv1alpha1.MaxCopyFailures + 5 {
		rep.Failed = append(rep.Failed, replica.Failure{Key: fmt.Sprintf("e/f%02d", i), Err: errors.New("refused")})
	}
	later := first.Add(3 * time.Hour)
	behind := Report(Copied{Entry: "e", Created: created, Start: later, Report: rep, Err: replica.ErrDiffers}, &done)
	if behind.Complete || behind.Lag.Duration != 2*time.Hour || behind.Newest != newest || behind.Differing != 1 ||
		behind.FailedObjects != int64(backupv1alpha1.MaxCopyFailures+5) || len(behind.Failures) != backupv1alpha1.MaxCopyFailures ||
		behind.Failures[0].Key != "e/x" || !strings.Contains(behind.Failures[0].Reason, "differs") {
		t.Errorf("a copy that found a difference: %+v", behind)
	}
}

// Record keeps a result per selected entry (the last one of an entry not in this run), drops
// those no longer selected, orders incomplete first, then by lag, and counts over all.
func TestRecord(t *testing.T) {
	run := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	result := func(entry string, complete bool, lag time.Duration) backupv1alpha1.EntryCopyResult {
		return backupv1alpha1.EntryCopyResult{Entry: entry, Complete: complete, Lag: metav1.Duration{Duration: lag}}
	}
	status := &backupv1alpha1.BackupCopyPolicyStatus{Results: []backupv1alpha1.EntryCopyResult{
		result("kept", true, 3*time.Hour), result("gone", false, time.Hour)}}
	Record(status, run, []backupv1alpha1.EntryCopyResult{result("ok", true, 0), result("failed", false, 30*time.Minute)},
		[]string{"ok", "failed", "kept"}, 2*time.Hour)
	var order []string
	for _, r := range status.Results {
		order = append(order, r.Entry)
	}
	if got := strings.Join(order, " "); got != "failed kept ok" || status.Entries != 3 || status.Failed != 1 || status.Behind != 1 ||
		!status.LastRun.Time.Equal(run) {
		t.Errorf("results %s, entries %d, failed %d, behind %d", got, status.Entries, status.Failed, status.Behind)
	}
	many := make([]backupv1alpha1.EntryCopyResult, backupv1alpha1.MaxEntryCopyResults+1)
	names := make([]string, len(many))
	for i := range many {
		names[i] = fmt.Sprintf("e%03d", i)
		many[i] = result(names[i], true, 0)
	}
	Record(status, run, many, names, time.Hour)
	if len(status.Results) != backupv1alpha1.MaxEntryCopyResults || status.Entries != int32(len(many)) {
		t.Errorf("%d results of %d entries, want %d", len(status.Results), status.Entries, backupv1alpha1.MaxEntryCopyResults)
	}
}

// The objects a destination copied server-side are counted apart, among those copied.
func TestMetricsCountServerSideCopies(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observe("p", Copied{Entry: "e", Report: &replica.Report{Copied: 5, CopiedBytes: 50, ServerSide: 3}}, backupv1alpha1.EntryCopyResult{})
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			got[f.GetName()] += s.GetCounter().GetValue()
		}
	}
	if got["housekeeper_copy_objects_total"] != 5 || got["housekeeper_copy_server_side_objects_total"] != 3 {
		t.Errorf("counters %v; want 5 objects copied, 3 of them server-side", got)
	}
}
