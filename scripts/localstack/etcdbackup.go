package localstack

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// startExampleEtcd starts the etcd that infra/examples/30-etcd-backup.yaml backs up, with a
// writer changing a key every 3 s so that each backup differs, and keeps its host:port for
// the example's ${EXAMPLE_ETCD_ADDRESS}. stop stops the writer and the etcd.
func (s *session) startExampleEtcd(ctx context.Context) (stop func(), err error) {
	m, err := stack.NewEtcdMember("etcd-backup-example", filepath.Join(s.etcdRoot, "etcd-backup-example"))
	if err != nil {
		return nil, err
	}
	etcd, err := s.etcdbr.StartEtcd(m)
	if err != nil {
		return nil, err
	}
	s.exampleEtcdAddress = strings.TrimPrefix(etcd.ClientURL, "http://")
	writerCtx, stopWriter := context.WithCancel(ctx)
	go func() {
		for i := 0; writerCtx.Err() == nil; i++ {
			_, _ = etcd.Put(writerCtx, fmt.Sprintf("/registry/configmaps/default/example-%d", i%100), time.Now().Format(time.RFC3339))
			select {
			case <-writerCtx.Done():
			case <-time.After(3 * time.Second):
			}
		}
	}()
	fmt.Fprintf(s.opts.Out, "example etcd for the EtcdBackupConfig example at %s\n", etcd.ClientURL)
	return func() { stopWriter(); etcd.Stop() }, nil
}

// renderEtcdBackups prints the EtcdBackupConfigs with their backups.
func (s *session) renderEtcdBackups(out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &backupv1alpha1.EtcdBackupConfigList{}
	if err := s.client.List(ctx, list); err != nil || len(list.Items) == 0 {
		return
	}
	fmt.Fprintln(out, "\nETCD BACKUPS")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CONFIG\tSCHEDULE\tKEEP\tKEPT\tLAST BACKUP\tSIZE\tTOOK\tNEXT\tSTATUS")
	for _, c := range list.Items {
		last, size, took := "-", "-", "-"
		if b := c.Status.LastBackup; b != nil {
			last, size, took = b.Key, fmt.Sprintf("%d KiB", b.Size>>10), b.Duration.Duration.String()
		}
		next := "-"
		if c.Status.NextRun != nil {
			next = c.Status.NextRun.Local().Format(time.TimeOnly)
		}
		status := "pending"
		if cond := meta.FindStatusCondition(c.Status.Conditions, backupv1alpha1.ConditionBackupSucceeded); cond != nil {
			status = cond.Reason
			if cond.Status != metav1.ConditionTrue {
				status += ": " + kube.Truncate(cond.Message, 60)
			}
		} else if cond := meta.FindStatusCondition(c.Status.Conditions, backupv1alpha1.ConditionScheduled); cond != nil {
			status = cond.Reason
		}
		kept := make([]string, 0, len(c.Status.Backups))
		for _, b := range c.Status.Backups {
			kept = append(kept, b.Time.Local().Format(time.TimeOnly))
		}
		fmt.Fprintf(tw, "  %s/%s\t%s\t%d\t%d [%s]\t%s\t%s\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Spec.Schedule, c.Spec.Keep,
			len(c.Status.Backups), strings.Join(kept, " "), last, size, took, next, status)
	}
	_ = tw.Flush()
}
