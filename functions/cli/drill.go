package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// errNotRestorable is a drill that ran and found the backups do not restore.
var errNotRestorable = errors.New("the backups do not restore")

// runDrill drills one BackupEntry's or EtcdBackupConfig's backups now and prints the result.
func runDrill(ctx context.Context, args []string, out io.Writer, plugins []objectstore.Plugin) error {
	fs := newFlags("drill", "(--entry NAME [--etcd NAME] [--copy-policy NAME] | --config NAMESPACE/NAME) [--etcdbrctl FILE] [--kubeconfig FILE] [--work-dir DIR] [--keep DIR] [--output text|json]",
		"Restore a BackupEntry's latest full snapshot and the delta snapshots after it, as etcd-backup-restore\n"+
			"lays them out under <entry>/<etcd>/, or the newest backup an EtcdBackupConfig keeps in its destination,\n"+
			"into a throwaway etcd, and check them: every SHA-256, revisions without a gap, every event at its\n"+
			"revision. The store is opened as the purge or the snapshot function opens it and never written to.\n"+
			"With --copy-policy it drills the entry's copy that BackupCopyPolicy keeps in its BackupDestination instead.\n"+
			"With --etcdbrctl it also runs etcd-backup-restore's own restore on the same backups, in a process of\n"+
			"its own, and compares its store with the drill's at the same revision.\n"+
			"With --keep DIR, a drill of an entry's etcd-main that passes (exact or restorable) keeps the objects it\n"+
			"proved, as stored, under DIR/<bucket>/<entry>/etcd-main/v2/, its result in DIR/<entry>.drill.json, and\n"+
			"prints the --backup-data-path to give `gardenadm restore`; it keeps nothing of a drill that fails, and\n"+
			"refuses a DIR that holds a set for the entry already.\n"+
			"It exits 1 when the backups do not restore, naming the object at fault.")
	entryName := fs.String("entry", "", "the BackupEntry whose backups to drill")
	configName := fs.String("config", "", "the EtcdBackupConfig, as namespace/name, whose newest backup to drill")
	copyPolicy := fs.String("copy-policy", "", "drill the entry's copy this BackupCopyPolicy keeps (its BackupDestination, the same keys) instead of its bucket")
	etcd := fs.String("etcd", gardener.EtcdMain, "the etcd under the entry's prefix: etcd-druid backs up etcd-main")
	workDir := fs.String("work-dir", "", "where the throwaway etcd's files go (default: the temporary directory); it needs about twice the snapshot's size")
	keepDir := fs.String("keep", "", "keep the snapshots a passing drill proved under this directory, for gardenadm restore --backup-data-path (etcd-main of an entry only)")
	output := fs.String("output", "text", "text or json")
	etcdbrctlPath := fs.String("etcdbrctl", "", "etcd-backup-restore's etcdbrctl: run its restore too and compare (empty: not run, and the result says so)")
	shootEtcd := fs.Bool("live-shoot-etcd", false, "compare an entry's drill with its shoot's running etcd (etcd-druid's Etcd in the shoot's namespace, its client service and TLS secrets: run it in the seed); a config's drill is compared with its etcd always")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	var kubeOpts kube.Options
	kubeOpts.BindFlags(fs.FlagSet, os.Getenv("KUBECONFIG"))
	stores := objectstore.BindPlugins(fs.FlagSet, plugins...)
	if err := fs.parse(args); err != nil {
		return err
	}
	configKey, err := parseConfigName(*configName)
	switch {
	case (*entryName == "") == (*configName == ""):
		return fmt.Errorf("%w: drill needs --entry or --config, one of them", errUsage)
	case err != nil:
		return fmt.Errorf("%w: drill: %v", errUsage, err)
	case *output != "text" && *output != "json":
		return fmt.Errorf("%w: drill: --output is text or json, not %q", errUsage, *output)
	case *etcd == "":
		return fmt.Errorf("%w: drill: --etcd is empty", errUsage)
	case *copyPolicy != "" && *entryName == "":
		return fmt.Errorf("%w: drill: --copy-policy drills an entry's copy: it needs --entry", errUsage)
	case *keepDir != "" && *entryName == "":
		return fmt.Errorf("%w: drill: --keep keeps an entry's etcd-backup-restore snapshots for gardenadm restore: it needs --entry", errUsage)
	case *keepDir != "" && *etcd != gardener.EtcdMain:
		return fmt.Errorf("%w: drill: --keep keeps %s's snapshots, which gardenadm restores, not --etcd %s", errUsage, gardener.EtcdMain, *etcd)
	}
	if err := kubeOpts.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	providers, err := stores()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg, err := kubeOpts.Config()
	if err != nil {
		return err
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	opts := drill.Options{WorkDir: *workDir}
	if *etcdbrctlPath != "" {
		if opts.Etcdbrctl, err = drill.NewEtcdbrctl(ctx, *etcdbrctlPath); err != nil {
			return fmt.Errorf("%w: --etcdbrctl: %v", errUsage, err)
		}
	}
	var target drill.Target
	if *entryName != "" {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := c.Get(ctx, client.ObjectKey{Name: *entryName}, be); err != nil {
			return fmt.Errorf("reading BackupEntry %s: %w", *entryName, err)
		}
		target = drill.EntryTarget(c, providers, be, *etcd)
		if *copyPolicy != "" {
			target = drill.CopyTarget(c, providers, be, *etcd, *copyPolicy)
		}
		if *shootEtcd {
			target = target.WithLive(drill.ShootEtcd(c, gardener.EntryNamespace(be.Name), *etcd))
		}
	} else {
		cfg := &backupv1alpha1.EtcdBackupConfig{}
		if err := c.Get(ctx, configKey, cfg); err != nil {
			return fmt.Errorf("reading EtcdBackupConfig %s: %w", configKey, err)
		}
		target = drill.ConfigTarget(c, providers, cfg)
	}
	store, bucket, err := target.Open(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", target.Kind, target.Name, err)
	}
	var src drill.Source = store
	var keeper *drill.Keeper
	if *keepDir != "" {
		if keeper, err = drill.NewKeeper(*keepDir, bucket, target.Prefix); err != nil {
			return fmt.Errorf("--keep: %w", err)
		}
		defer keeper.Discard()
		src = keeper.Source(store)
	}
	var res drill.Result
	if opts, err = target.Options(ctx, opts); err == nil {
		res, err = drill.Run(ctx, src, target.Prefix, opts)
	}
	var kept *drill.Kept
	var keepErr error
	if keeper != nil {
		k, kerr := keeper.Keep(res, err, func(k drill.Kept) ([]byte, error) {
			var b strings.Builder
			perr := printDrillJSON(&b, target, bucket, res, err, &k, nil)
			return []byte(b.String()), perr
		})
		if kerr == nil {
			kept = &k
		}
		keepErr = kerr
	}
	var derr *drill.Error
	broken := errors.As(err, &derr) && derr.AboutTheBackup()
	if *output == "json" {
		if perr := printDrillJSON(out, target, bucket, res, err, kept, keepErr); perr != nil {
			return perr
		}
	} else {
		printDrill(out, target, bucket, res, err, time.Now())
		printKept(out, kept, keepErr)
	}
	if broken {
		return fmt.Errorf("%w: %v", errNotRestorable, err)
	}
	if err == nil && keepErr != nil {
		return fmt.Errorf("--keep: %w", keepErr)
	}
	return err
}

// printKept says what --keep kept and how gardenadm restores from it, or why it kept nothing.
func printKept(out io.Writer, kept *drill.Kept, err error) {
	switch {
	case kept != nil:
		fmt.Fprintf(out, "  kept           %d objects in %s, the result in %s\n", len(kept.Objects), kept.BackupDataPath, kept.ResultFile)
		fmt.Fprintf(out, "  restore with   gardenadm restore --backup-data-path %s\n", kept.BackupDataPath)
	case err != nil:
		fmt.Fprintf(out, "  keep           %v\n", err)
	}
}

// parseConfigName reads --config's namespace/name; "" is no config.
func parseConfigName(s string) (client.ObjectKey, error) {
	if s == "" {
		return client.ObjectKey{}, nil
	}
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--config %q is not namespace/name", s)
	}
	return client.ObjectKey{Namespace: namespace, Name: name}, nil
}

// verdicts are the drill outcomes as printDrill says them.
var verdicts = map[string]string{
	backupv1alpha1.OutcomeExact:         "exact",
	backupv1alpha1.OutcomeRestorable:    "restorable",
	backupv1alpha1.OutcomeUnverified:    "restorable, unverified against the live etcd",
	backupv1alpha1.OutcomeNotRestorable: "NOT RESTORABLE",
	backupv1alpha1.OutcomeError:         "not drilled",
}

// printDrill writes the result for a person.
func printDrill(out io.Writer, t drill.Target, bucket string, res drill.Result, err error, now time.Time) {
	verdict := verdicts[drill.Report(t.Name, now, res, err).Outcome]
	if t.Source != "" {
		bucket = t.Source + ", bucket " + bucket
	} else {
		bucket = "bucket " + bucket
	}
	fmt.Fprintf(out, "drill of %s %s, %s, prefix %s: %s\n", t.Kind, t.Name, bucket, res.Prefix, verdict)
	if res.Full != "" {
		fmt.Fprintf(out, "  full snapshot  %s\n", res.Full)
		last := "none"
		if n := len(res.Deltas); n > 0 {
			last = "the last " + res.Deltas[n-1]
		}
		fmt.Fprintf(out, "  deltas         %d (%s)\n", len(res.Deltas), last)
		fmt.Fprintf(out, "  newest point   %s (%s ago)\n", res.NewestPoint.UTC().Format(time.RFC3339), now.Sub(res.NewestPoint).Round(time.Second))
	}
	if err != nil {
		fmt.Fprintf(out, "  reason         %v\n", err)
	} else {
		fmt.Fprintf(out, "  restored       revision %d (full snapshot's %d), %d keys, db %d bytes (%d in use)\n", res.Revision, res.FullRevision, res.Keys, res.DBSize, res.DBSizeInUse)
		fmt.Fprintf(out, "  applied        %d delta events (%d already in the full snapshot, checked), %d leases kept alive\n", res.Events, res.SkippedEvents, res.Leases)
		fmt.Fprintf(out, "  digests        keys and values sha256:%s, etcd HashKV %d\n", res.KVSHA256, res.HashKV)
	}
	if s := res.RealRestore.Summary(); s != "" {
		fmt.Fprintf(out, "  real restore   %s\n", s)
	}
	if l := res.Live; l != nil {
		fmt.Fprintf(out, "  live etcd      %s: %s\n", l.Outcome, l.Reason)
		if l.Revision > 0 {
			fmt.Fprintf(out, "  behind live    %d revisions, %s\n", l.BehindRevisions, time.Duration(l.BehindSeconds)*time.Second)
		}
	}
	fmt.Fprintf(out, "  read           %d bytes in %s\n", res.ReadBytes, res.Duration.Round(time.Millisecond))
}

// drillReport is the JSON form of a drill.
type drillReport struct {
	// Entry is the BackupEntry drilled; Config the EtcdBackupConfig, as namespace/name.
	Entry  string `json:"entry,omitempty"`
	Config string `json:"config,omitempty"`
	// Source is copy/<policy> for a drill of the entry's copy (--copy-policy).
	Source     string `json:"source,omitempty"`
	Bucket     string `json:"bucket"`
	Restorable bool   `json:"restorable"`
	// Outcome is the outcome a RestoreDrill's status would record (Exact, Restorable, ...).
	Outcome string       `json:"outcome"`
	Error   string       `json:"error,omitempty"`
	Result  drill.Result `json:"result"`
	// Kept is the set --keep kept; NotKept why it kept none.
	Kept    *drill.Kept `json:"kept,omitempty"`
	NotKept string      `json:"notKept,omitempty"`
}

func printDrillJSON(out io.Writer, t drill.Target, bucket string, res drill.Result, err error, kept *drill.Kept, keepErr error) error {
	r := drillReport{Source: t.Source, Bucket: bucket, Restorable: err == nil, Outcome: drill.Report(t.Name, time.Now(), res, err).Outcome, Result: res, Kept: kept}
	if keepErr != nil {
		r.NotKept = keepErr.Error()
	}
	if t.Kind == backupv1alpha1.DrilledEtcdBackupConfig {
		r.Config = t.Name
	} else {
		r.Entry = t.Name
	}
	if err != nil {
		r.Error = err.Error()
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
