package localstack

import (
	"context"
	"fmt"
	"io"
	"path"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// renderCopies prints the BackupCopyPolicies and each entry's last copy: complete or why not,
// its lag, what the last run wrote and the newest object in the copy.
func (s *session) renderCopies(out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &backupv1alpha1.BackupCopyPolicyList{}
	if err := s.client.List(ctx, list); err != nil || len(list.Items) == 0 {
		return
	}
	fmt.Fprintln(out, "\nCOPIES")
	for _, p := range list.Items {
		last, next := clock(p.Status.LastRun), clock(p.Status.NextRun)
		status := "pending"
		for _, t := range []string{backupv1alpha1.ConditionFailedOver, backupv1alpha1.ConditionCopiesSucceeded, backupv1alpha1.ConditionScheduled} {
			if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && (t != backupv1alpha1.ConditionFailedOver || c.Status == "True") {
				status = c.Reason
				break
			}
		}
		fmt.Fprintf(out, "  %s → %s  %s  last %s  next %s  %d entries: %d failed, %d behind  %s\n", p.Name, p.Spec.Destination, p.Spec.Schedule,
			last, next, p.Status.Entries, p.Status.Failed, p.Status.Behind, status)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, r := range p.Status.Results {
			state := "complete"
			if !r.Complete {
				state = "incomplete, " + r.Lag.Duration.String() + " behind"
			}
			line := fmt.Sprintf("    %s\t%s\t%d objects, %d bytes copied, %d verified before\tnewest %s", r.Entry, state, r.Objects, r.Bytes, r.Skipped, path.Base(r.Newest))
			if r.Reason != "" {
				line += "\t" + kube.Truncate(r.Reason, 80)
			}
			fmt.Fprintln(tw, line)
		}
		_ = tw.Flush()
	}
}

// copied reports whether every BackupCopyPolicy's last run found each entry it selects wholly
// in the copy: make run's proof that the copy function copied what etcd-backup-restore wrote.
func (s *session) copied(ctx context.Context) bool {
	list := &backupv1alpha1.BackupCopyPolicyList{}
	if err := s.client.List(ctx, list); err != nil {
		return false
	}
	for _, p := range list.Items {
		st := p.Status
		if st.LastRun == nil || st.Entries == 0 || st.Failed != 0 || len(st.Results) != int(st.Entries) {
			return false
		}
		for _, r := range st.Results {
			if !r.Complete || r.Newest == "" {
				return false
			}
		}
	}
	return true
}
