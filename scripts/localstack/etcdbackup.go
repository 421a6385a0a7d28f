package localstack

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// The EtcdBackupConfig example: an etcd of its own, backed up every minute into the local
// example bucket, keeping 3 — after four minutes the table shows old backups going.
const (
	etcdBackupNamespace   = "etcd-backups"
	etcdBackupName        = "main"
	etcdBackupDestination = "example-local"
	etcdBackupSchedule    = "0 * * * * *"
	etcdBackupKeep        = 3
)

// startEtcdBackups starts the example's etcd with some keys and a writer, and creates its
// BackupDestination and EtcdBackupConfig. stop stops the etcd.
func (s *session) startEtcdBackups(ctx context.Context) (stop func(), err error) {
	m, err := stack.NewEtcdMember("etcd-backup-example", filepath.Join(s.etcdRoot, "etcd-backup-example"))
	if err != nil {
		return nil, err
	}
	etcd, err := s.etcdbr.StartEtcd(m)
	if err != nil {
		return nil, err
	}
	writerCtx, stopWriter := context.WithCancel(ctx)
	stop = func() { stopWriter(); etcd.Stop() }
	go func() { // a key changes every 3 s, so each backup differs
		for i := 0; writerCtx.Err() == nil; i++ {
			_, _ = etcd.Put(writerCtx, fmt.Sprintf("/registry/configmaps/default/example-%d", i%100), time.Now().Format(time.RFC3339))
			select {
			case <-writerCtx.Done():
			case <-time.After(3 * time.Second):
			}
		}
	}()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: etcdBackupNamespace}}
	dest := &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: etcdBackupDestination},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: "local", Bucket: etcdBackupDestination}}
	cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: etcdBackupNamespace, Name: etcdBackupName},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{
			Etcd:     backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
			Schedule: etcdBackupSchedule, Keep: etcdBackupKeep, Destination: dest.Name,
		}}
	for _, err := range []error{s.client.Create(ctx, ns), s.client.Create(ctx, dest), s.client.Create(ctx, cfg)} {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			stop()
			return nil, err
		}
	}
	fmt.Fprintf(s.opts.Out, "EtcdBackupConfig %s/%s: etcd at %s backed up %q (every minute), keeping %d, into %s\n",
		etcdBackupNamespace, etcdBackupName, etcd.ClientURL, etcdBackupSchedule, etcdBackupKeep, filepath.Join(s.localRoot, etcdBackupDestination, etcdBackupNamespace, etcdBackupName))
	return stop, nil
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
				status += ": " + truncate(cond.Message, 60)
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
