package localstack

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// renderDrills prints the RestoreDrills and each entry's last drill: its outcome, the revision
// restored, how old the newest restorable snapshot was (the RPO as measured), or why it failed.
func (s *session) renderDrills(out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &backupv1alpha1.RestoreDrillList{}
	if err := s.client.List(ctx, list); err != nil || len(list.Items) == 0 {
		return
	}
	fmt.Fprintln(out, "\nRESTORE DRILLS")
	for _, d := range list.Items {
		last, next := clock(d.Status.LastRun), clock(d.Status.NextRun)
		status := "pending"
		if c := meta.FindStatusCondition(d.Status.Conditions, backupv1alpha1.ConditionDrillsSucceeded); c != nil {
			status = c.Reason
		} else if c := meta.FindStatusCondition(d.Status.Conditions, backupv1alpha1.ConditionScheduled); c != nil {
			status = c.Reason
		}
		fmt.Fprintf(out, "  %s  %s  last %s  next %s  %d drilled: %d restorable, %d failed, %d stale  %s\n", d.Name, d.Spec.Schedule, last, next,
			d.Status.Entries, d.Status.Restorable, d.Status.Failed, d.Status.Stale, status)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, r := range d.Status.Results {
			line := fmt.Sprintf("    %s\t%s\t%s\t%s", r.Entry, r.Outcome, r.Time.Local().Format(time.TimeOnly), drillDetail(r))
			if r.Reason != "" {
				line += "\t" + kube.Truncate(r.Reason, 80)
			}
			fmt.Fprintln(tw, line)
		}
		_ = tw.Flush()
	}
}

// clock is t's local time of day, or "-" for none.
func clock(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.TimeOnly)
}

// drillDetail is what a drill restored: the revision and keys, and the age of the newest
// snapshot it restored when the drill ran.
func drillDetail(r backupv1alpha1.EntryDrillResult) string {
	if !backupv1alpha1.Passed(r.Outcome) {
		return "-"
	}
	rpo := "-"
	if r.NewestRestorablePoint != nil {
		rpo = r.Time.Sub(r.NewestRestorablePoint.Time).Round(time.Second).String()
	}
	return fmt.Sprintf("revision %d, %d keys, newest snapshot %s old, took %s", r.RestoredRevision, r.Keys, rpo, r.Duration.Round(time.Millisecond))
}

// drilled reports whether every live entry and config (namespace/name) has a drill that
// restored: make run's proof that the backups etcd-backup-restore and the snapshot function
// wrote come back.
func (s *session) drilled(ctx context.Context, live []string) bool {
	list := &backupv1alpha1.RestoreDrillList{}
	if err := s.client.List(ctx, list); err != nil {
		return false
	}
	restorable := map[string]bool{}
	for _, d := range list.Items {
		for _, r := range d.Status.Results {
			restorable[r.Entry] = restorable[r.Entry] || backupv1alpha1.Passed(r.Outcome)
		}
	}
	for _, name := range live {
		if !restorable[name] {
			return false
		}
	}
	return len(list.Items) > 0
}
