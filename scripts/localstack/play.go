package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/kube"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	examples "github.com/housekeeper-dev/housekeeper/infra/examples"
)

// LabelDeleteAfterReady marks the example entries deleted once they are ready.
const LabelDeleteAfterReady = "examples.housekeeper.dev/delete-after-ready"

// play applies the examples, runs each example shoot's etcd with etcd-backup-restore, deletes
// the marked entry once its snapshots are in the bucket, and shows the status until ctx is
// done (or, with ExitWhenDone, until everything is done).
func (s *session) play(ctx context.Context) error {
	files, err := fs.Glob(examples.Files, "*.yaml")
	if err != nil {
		return err
	}
	slices.Sort(files)
	stopEtcd, err := s.startExampleEtcd(ctx)
	if err != nil {
		return fmt.Errorf("the EtcdBackupConfig example: %w", err)
	}
	defer stopEtcd()
	for _, name := range files {
		fmt.Fprintf(s.opts.Out, "applying infra/examples/%s …\n", name)
		if err := s.apply(ctx, name); err != nil {
			return fmt.Errorf("infra/examples/%s: %w", name, err)
		}
		if err := s.waitReady(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.opts.Out, "starting etcd and etcd-backup-restore for each shoot, configured from its etcd-backup secret …")
	if err := s.startShoots(ctx); err != nil {
		return err
	}
	fmt.Fprintln(s.opts.Out, "waiting for a full and a delta snapshot of every shoot …")
	if err := s.waitSnapshots(ctx); err != nil {
		return err
	}
	doomed, err := s.deleteMarked(ctx)
	if err != nil {
		return err
	}
	return s.watch(ctx, doomed)
}

func (s *session) apply(ctx context.Context, name string) error {
	data, err := examples.Files.ReadFile(name)
	if err != nil {
		return err
	}
	data = []byte(os.Expand(string(data), func(key string) string {
		if key == "AZURITE_ENDPOINT" {
			return s.azurite.Endpoint
		}
		if key == "S3_ENDPOINT" {
			return s.s3.Endpoint
		}
		if key == "GCS_ENDPOINT" {
			return s.gcs.Endpoint
		}
		if key == "EXAMPLE_ETCD_ADDRESS" {
			return s.exampleEtcdAddress
		}
		return "$" + key
	}))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := s.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// waitReady waits until every example bucket and entry is Succeeded.
func (s *session) waitReady(ctx context.Context) error {
	for {
		rows, err := s.rows(ctx)
		if err != nil {
			return err
		}
		ready := true
		for _, r := range rows {
			ready = ready && r.state == "Succeeded"
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *session) deleteMarked(ctx context.Context) ([]string, error) {
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := s.client.List(ctx, entries, client.MatchingLabels{LabelDeleteAfterReady: "true"}); err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries.Items {
		// Gardener deletes the shoot's control plane, etcd among it, before its BackupEntry.
		sh := s.shoots[e.Name]
		sh.stop()
		c, err := sh.count(ctx)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(s.opts.Out, "stopped the etcd of %s; deleting its BackupEntry (retention %s) with %s snapshots under %s …\n",
			e.Name, e.Annotations[entry.AnnotationRetention], c, sh.prefix)
		if err := s.client.Delete(ctx, &e); err != nil {
			return nil, err
		}
		names = append(names, e.Name)
	}
	return names, nil
}

// watch redraws the status every two seconds; Done is printed once when the examples are
// Succeeded and the deleted entries are gone, with every snapshot under their prefixes.
func (s *session) watch(ctx context.Context, doomed []string) error {
	tty := isTerminal(s.opts.Out)
	done := false
	for {
		rows, err := s.rows(ctx)
		if err != nil {
			return err
		}
		purges, err := s.purges(ctx)
		if err != nil {
			return err
		}
		dead, _ := runner.ListDeadLetters(ctx, s.js, "")
		unresolved := 0
		for _, d := range dead {
			if !cli.StateOf(ctx, s.client, d).Resolved { // its object healed or went: not a live problem
				unresolved++
			}
		}
		if tty {
			fmt.Fprint(s.opts.Out, "\033[H\033[2J")
		}
		s.render(rows, purges, unresolved)
		if !done && s.finished(ctx, rows, doomed) {
			done = true
			fmt.Fprintf(s.opts.Out, "\n%s\n", Done)
			if s.opts.ExitWhenDone {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *session) finished(ctx context.Context, rows []row, doomed []string) bool {
	for _, r := range rows {
		if r.state != "Succeeded" || slices.Contains(doomed, r.name) {
			return false
		}
	}
	for _, name := range doomed {
		if c, err := s.shoots[name].count(ctx); err != nil || c.full+c.delta != 0 {
			return false
		}
	}
	var live []string
	for _, r := range rows {
		if r.kind == "BackupEntry" {
			live = append(live, r.name)
		}
	}
	configs := &backupv1alpha1.EtcdBackupConfigList{}
	if err := s.client.List(ctx, configs); err != nil {
		return false
	}
	for _, c := range configs.Items {
		live = append(live, c.Namespace+"/"+c.Name)
	}
	return s.drilled(ctx, live) && s.copied(ctx)
}

type row struct {
	kind, name, typ, operation, state, description string
	progress                                       int32
	snapshots                                      string // of a shoot's etcd-main, for an entry
}

func (s *session) rows(ctx context.Context) ([]row, error) {
	var rows []row
	add := func(kind string, obj extensionsv1alpha1.Object) {
		r := row{kind: kind, name: obj.GetName(), typ: obj.GetExtensionSpec().GetExtensionType()}
		if op := obj.GetExtensionStatus().GetLastOperation(); op != nil {
			r.operation, r.state, r.progress, r.description = string(op.Type), string(op.State), op.Progress, op.Description
		}
		if le := obj.GetExtensionStatus().GetLastError(); le != nil && r.state != string(gardencorev1beta1.LastOperationStateSucceeded) {
			r.description = le.Description
		}
		rows = append(rows, r)
	}
	buckets := &extensionsv1alpha1.BackupBucketList{}
	if err := s.client.List(ctx, buckets); err != nil {
		return nil, err
	}
	for i := range buckets.Items {
		add("BackupBucket", &buckets.Items[i])
	}
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := s.client.List(ctx, entries); err != nil {
		return nil, err
	}
	for i := range entries.Items {
		add("BackupEntry", &entries.Items[i])
		if sh := s.shoots[entries.Items[i].Name]; sh != nil {
			c, err := sh.count(ctx)
			if err != nil {
				return nil, err
			}
			rows[len(rows)-1].snapshots = c.String()
		}
	}
	return rows, nil
}

type scheduledPurge struct {
	entry string
	due   time.Time
}

func (s *session) purges(ctx context.Context) ([]scheduledPurge, error) {
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := s.client.List(ctx, entries); err != nil {
		return nil, err
	}
	var out []scheduledPurge
	for i := range entries.Items {
		e := &entries.Items[i]
		if e.DeletionTimestamp == nil {
			continue
		}
		if due, err := (entry.Retention{}).Due(e); err == nil {
			out = append(out, scheduledPurge{entry: e.Name, due: due})
		}
	}
	return out, nil
}

func (s *session) render(rows []row, purges []scheduledPurge, deadLetters int) {
	out := s.opts.Out
	fmt.Fprintf(out, "housekeeper local stack — %s (Ctrl-C stops it)\n\n", time.Now().Format(time.TimeOnly))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tTYPE\tOPERATION\tSTATE\tPROGRESS\tSNAPSHOTS\tDESCRIPTION")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d%%\t%s\t%s\n", r.kind, r.name, r.typ, r.operation, r.state, r.progress, r.snapshots, kube.Truncate(r.description, 90))
	}
	_ = tw.Flush()
	s.renderEtcdBackups(out)
	s.renderDrills(out)
	s.renderCopies(out)
	fmt.Fprintln(out, "\nSCHEDULED PURGES")
	if len(purges) == 0 {
		fmt.Fprintln(out, "  none")
	}
	for _, p := range purges {
		left := time.Until(p.due).Round(time.Second)
		if left < 0 {
			left = 0
		}
		fmt.Fprintf(out, "  %s  due %s  in %s\n", p.entry, p.due.Local().Format(time.TimeOnly), left)
	}
	fmt.Fprintf(out, "\nDEAD LETTERS (unresolved): %d\n", deadLetters)
	fmt.Fprintf(out, "\nkubectl:  export KUBECONFIG=%s\nNATS:     go run ./functions/cmd/housekeeper %s deadletters list\nAzurite:  %s\nS3:       %s\nGCS:      %s\nbuckets:  %s\netcd:     %s\nlogs:     %s\n",
		s.kubeconfig, s.operatorArgs, s.azurite.Endpoint, s.s3.Endpoint, s.gcs.Endpoint, s.localRoot, s.etcdRoot, s.opts.Dir)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
