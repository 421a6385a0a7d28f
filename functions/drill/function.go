// The drill function: when the NATS server fires a RestoreDrill's schedule, it drills the
// latest backups of every BackupEntry and EtcdBackupConfig the RestoreDrill selects and reports
// for each, in the RestoreDrill's status and as metrics, whether they restore.

package drill

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/process"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Definition declares the drill function. A run may take long (each entry's drill up to
// spec.timeout): the worker tells JetStream the event is in progress while the handler runs,
// so only a dead worker's run is delivered again.
var Definition = runner.Definition{
	Name: "drill",
	// It reads backups, and restores them into a throwaway etcd in its work directory, within a
	// memory budget its container's limit bounds.
	Needs: runner.Needs{APIServer: true, Stores: true, ReadOnlyStores: true, WorkDir: true, OwnResources: true, Feature: "etcdBackupConfig"},
	// Fired schedules.
	Types: []string{events.TypeDrillDue},
	Bind: func(fs *flag.FlagSet) runner.Constructor {
		etcdbrctl := fs.String("etcdbrctl", "", "etcd-backup-restore's etcdbrctl, of the version the seed's etcds run: each drill also runs its restore on the same backups and compares the two (empty: not run, and each result says so)")
		shootEtcds := fs.Bool("live-shoot-etcd", false, "compare each BackupEntry's drill with its shoot's running etcd-main in the seed (etcd-druid's Etcd, its client service and TLS secrets: the function must read Etcds and Secrets in the shoots' namespaces and reach their etcds); off, entry results say no live etcd is configured")
		podNamespace := fs.String("pod-namespace", "", "the namespace of this function's pods: with --live-shoot-etcd, before it connects to a shoot's etcd-main the function applies a NetworkPolicy in the shoot's namespace admitting its pods of this namespace to the etcd's client port (it must create and patch NetworkPolicies named "+EtcdPolicyName(gardener.EtcdMain)+" there); empty, it applies none")
		return func(ctx context.Context, d runner.Deps) (runner.Handler, error) {
			limit, err := process.ContainerMemoryLimit()
			if err != nil {
				d.Log.Warn("no container memory limit: memoryBudgets are not held to one", zap.Error(err))
			}
			d.Log.Info("drill runs' memory", zap.Int64("containerLimitBytes", limit), zap.Int64("processReserveBytes", ProcessMemoryReserve))
			dr := &Driller{Client: d.Client, Providers: d.Stores, Log: d.Log, Metrics: NewMetrics(d.Metrics), Now: time.Now,
				Memory: NewMemoryGate(limit), ShootEtcds: *shootEtcds}
			if *shootEtcds && *podNamespace != "" {
				dr.ShootEtcdsFrom = &Pods{Namespace: *podNamespace, Labels: DrillPodLabels}
			} else if *shootEtcds {
				d.Log.Warn("--live-shoot-etcd without --pod-namespace: the drill admits itself to no shoot's etcd-main, which a seed's NetworkPolicies do not admit it to")
			}
			if *etcdbrctl == "" {
				d.Log.Warn("no --etcdbrctl: drills do not run etcd-backup-restore's own restore, and their results say so: no BackupEntry's is Exact")
				return dr, nil
			}
			if dr.Etcdbrctl, err = NewEtcdbrctl(ctx, *etcdbrctl); err != nil {
				return nil, err
			}
			d.Log.Info("drills run etcd-backup-restore's restore too", zap.String("etcdbrctl", dr.Etcdbrctl.Path), zap.String("version", dr.Etcdbrctl.Version))
			return dr, nil
		}
	},
}

// Driller runs a RestoreDrill's drills once per fire of its schedule. It only reads the
// buckets: it never writes to one and never holds up a purge or a rotation.
type Driller struct {
	Client    client.Client
	Providers objectstore.Registry
	Log       *zap.Logger
	// Metrics may be nil: no metrics.
	Metrics *Metrics
	Now     func() time.Time
	// WorkDir is where drills make their temporary directories; "" is os.TempDir().
	WorkDir string
	// Memory holds the runs to the container's memory; nil holds nothing.
	Memory *MemoryGate
	// Etcdbrctl, if set, runs etcd-backup-restore's restore beside each drill
	// (Options.Etcdbrctl).
	Etcdbrctl *Etcdbrctl
	// ShootEtcds compares each BackupEntry's drill with its shoot's running etcd (ShootEtcd);
	// an EtcdBackupConfig's drill is compared with its etcd always.
	ShootEtcds bool
	// ShootEtcdsFrom, if set, are the pods ShootEtcds admits to each shoot's etcd before it
	// connects (ShootEtcdFrom).
	ShootEtcdsFrom *Pods
}

// Handle runs the drills for the fire that produced e. A fire delivered again after its run
// wrote its status runs nothing.
func (d *Driller) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Name: ref.Name}
	rd := &backupv1alpha1.RestoreDrill{}
	if err := d.Client.Get(ctx, key, rd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone: its schedule goes with it
		}
		return err
	}
	if rd.DeletionTimestamp != nil || (ref.UID != "" && string(rd.UID) != ref.UID) {
		return nil // deleting, or a new RestoreDrill of the same name with a schedule of its own
	}
	// A run dated ahead would make every run until then look done already: a fire ahead is
	// refused, nothing drilled.
	fire, err := runner.DatedFire(ctx, d.Now(), "drill-due event for "+ref.Name)
	if err != nil {
		return err
	}
	if last := rd.Status.LastRun; last != nil && !last.Time.Before(fire.At) {
		return nil // this fire's run, or a later one, wrote its status already
	}
	log := d.Log.With(zap.String("restoreDrill", ref.Name), zap.Time("fire", fire.At))

	plan, err := d.plan(ctx, rd)
	var release func()
	if err == nil {
		// The whole budget, for the whole run: its drills' shares, whatever their stores need.
		release, err = d.Memory.take(ctx, MemoryBudget(rd.Spec), log)
	}
	var invalid *destination.Problem
	switch {
	case errors.As(err, &invalid):
		log.Warn("nothing drilled", zap.Error(err))
		return kube.UpdateStatus(ctx, d.Client, key, newDrill, func(rd *backupv1alpha1.RestoreDrill) {
			setCondition(rd, false, invalid.Reason, invalid.Message)
			kube.SetNextRun(&rd.Status.NextRun, fire.Next)
		})
	case err != nil:
		return err
	}
	defer release()
	run := d.Now().UTC()
	log.Info("drilling", zap.Int("targets", len(plan.targets)), zap.Int("concurrency", plan.concurrency),
		zap.Int64("memoryShareBytes", plan.options.MemoryShare), zap.Duration("timeout", plan.timeout))
	reports := d.drillAll(ctx, plan, log)
	if ctx.Err() != nil {
		// Shutting down: the run is incomplete; the event goes back to another worker.
		return ctx.Err()
	}
	// The status is the run's whole verdict: the bridge exports it as metrics, between runs too
	// (this function's pod is gone then). Deleted while it ran, there is none to write.
	return kube.UpdateStatus(ctx, d.Client, key, newDrill, func(rd *backupv1alpha1.RestoreDrill) {
		Record(&rd.Status, run, reports, plan.selected(), plan.maxAge)
		ok, reason, message := verdict(reports)
		setCondition(rd, ok, reason, message)
		kube.SetNextRun(&rd.Status.NextRun, fire.Next)
	})
}

// plan is one run: what to drill and how.
type plan struct {
	targets     []planned
	concurrency int
	timeout     time.Duration
	maxAge      time.Duration
	options     Options
}

// planned is one target of a run, and the copy of its backups drilled after it (spec.source
// Both), nil where there is none.
type planned struct {
	Target
	copy *Target
}

// selected names what the run drills, as its results name them.
func (p plan) selected() []string {
	names := make([]string, len(p.targets))
	for i := range p.targets {
		names[i] = p.targets[i].Name
	}
	return names
}

// invalidDrill is a spec that cannot run as it is (a Problem): it becomes a False condition
// and is not retried; the next fire, after a fix of the spec, tries again.
func invalidDrill(err error) *destination.Problem {
	return destination.Invalid(backupv1alpha1.ReasonInvalidDrill, err)
}

// plan picks the entries rd drills now and sizes the run from its spec.
func (d *Driller) plan(ctx context.Context, rd *backupv1alpha1.RestoreDrill) (plan, error) {
	p := plan{
		concurrency: int(rd.Spec.Concurrency),
		timeout:     backupv1alpha1.DefaultDrillTimeout,
		maxAge:      rd.Spec.EffectiveMaxRestorableAge(),
		// etcd's own logs are left out, as `housekeeper drill` leaves them: a failure's error
		// says what failed.
		options: Options{WorkDir: d.WorkDir, Etcdbrctl: d.Etcdbrctl},
	}
	if p.options.WorkDir == "" {
		p.options.WorkDir = os.TempDir()
	}
	if p.concurrency < 1 {
		p.concurrency = backupv1alpha1.DefaultDrillConcurrency
	}
	if t := rd.Spec.Timeout; t != nil && t.Duration > 0 {
		p.timeout = t.Duration
	}
	sel, err := Select(rd.Spec)
	if err != nil {
		return p, invalidDrill(err)
	}
	// A spec whose drills cannot fit says so instead of running out of memory; each drill
	// checks its store's keys against its share before etcd starts on them.
	if p.options.MemoryShare, err = MemoryShare(rd.Spec, p.options); err != nil {
		return p, invalidDrill(err)
	}
	if sel.Entries() {
		list := &extensionsv1alpha1.BackupEntryList{}
		if err := d.Client.List(ctx, list); err != nil {
			return p, fmt.Errorf("listing BackupEntries: %w", err)
		}
		for i := range list.Items {
			if be := &list.Items[i]; sel.Selects(be, gardener.ShootPurpose(be)) {
				p.targets = append(p.targets, d.entryTargets(rd.Spec, be))
			}
		}
	}
	if sel.Configs() {
		list := &backupv1alpha1.EtcdBackupConfigList{}
		if err := d.Client.List(ctx, list); err != nil {
			return p, fmt.Errorf("listing EtcdBackupConfigs: %w", err)
		}
		for i := range list.Items {
			if cfg := &list.Items[i]; sel.SelectsConfig(cfg) {
				p.targets = append(p.targets, planned{Target: ConfigTarget(d.Client, d.Providers, cfg)})
			}
		}
	}
	return p, nil
}

// entryTargets are be's backups as spec.source says: in its bucket, in the copy of
// spec.copyPolicy, or the bucket's and then the copy's.
func (d *Driller) entryTargets(spec backupv1alpha1.RestoreDrillSpec, be *extensionsv1alpha1.BackupEntry) planned {
	withLive := func(t Target) Target {
		switch ns := gardener.EntryNamespace(be.Name); {
		case d.ShootEtcds && d.ShootEtcdsFrom != nil:
			t = t.WithLive(ShootEtcdFrom(d.Client, ns, gardener.EtcdMain, *d.ShootEtcdsFrom))
		case d.ShootEtcds:
			t = t.WithLive(ShootEtcd(d.Client, ns, gardener.EtcdMain))
		}
		return t
	}
	bucket := withLive(EntryTarget(d.Client, d.Providers, be, gardener.EtcdMain))
	if spec.Source != backupv1alpha1.DrillCopy && spec.Source != backupv1alpha1.DrillBoth {
		return planned{Target: bucket}
	}
	copied := withLive(CopyTarget(d.Client, d.Providers, be, gardener.EtcdMain, spec.CopyPolicy))
	if spec.Source == backupv1alpha1.DrillCopy {
		return planned{Target: copied}
	}
	return planned{Target: bucket, copy: &copied}
}

// drillAll drills p's targets, at most p.concurrency at once, and returns their reports in
// the targets' order.
func (d *Driller) drillAll(ctx context.Context, p plan, log *zap.Logger) []backupv1alpha1.EntryDrillResult {
	reports := make([]backupv1alpha1.EntryDrillResult, len(p.targets))
	slots := make(chan struct{}, p.concurrency)
	var wg sync.WaitGroup
	for i := range p.targets {
		slots <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			t := p.targets[i]
			reports[i] = d.drillOne(ctx, t.Target, p, log)
			if t.copy != nil && ctx.Err() == nil {
				reports[i] = WithCopy(reports[i], d.drillOne(ctx, *t.copy, p, log))
			}
		})
	}
	wg.Wait()
	return reports
}

// drillOne drills t's backups within p.timeout.
func (d *Driller) drillOne(ctx context.Context, t Target, p plan, log *zap.Logger) backupv1alpha1.EntryDrillResult {
	start := d.Now().UTC()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var res Result
	store, _, err := t.Open(ctx)
	var opts Options
	if err == nil {
		opts, err = t.Options(ctx, p.options)
	}
	if err == nil {
		res, err = Run(ctx, store, t.Prefix, opts)
	}
	if deadline, _ := ctx.Deadline(); err != nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || !time.Now().Before(deadline)) {
		// Cut short, a read may look like a truncated snapshot: a drill out of time judges
		// nothing about the backup (an Error, never NotRestorable).
		err = fmt.Errorf("the drill did not finish within its timeout %s: %v", p.timeout, err)
	}
	report := Report(t.Name, start, res, err)
	report.Kind, report.Source = t.Kind, t.Source
	d.Metrics.observeDuration(report.Outcome, time.Since(start))
	log = log.With(zap.String("kind", t.Kind), zap.String("name", t.Name), zap.String("source", t.Source), zap.String("outcome", report.Outcome), zap.Duration("took", time.Since(start)))
	if err != nil {
		log.Warn("drill failed", zap.String("object", report.Object), zap.Error(err))
	} else {
		log.Info("drilled", zap.Int64("revision", res.Revision), zap.Int64("keys", res.Keys), zap.Time("newestPoint", res.NewestPoint))
	}
	if l := res.Live; l != nil {
		log.Info("the live etcd", zap.String("live", l.Outcome), zap.String("endpoint", l.Endpoint), zap.Int64("liveRevision", l.Revision),
			zap.Int64("behindRevisions", l.BehindRevisions), zap.Int64("behindSeconds", l.BehindSeconds), zap.Bool("byKeys", l.ByKeys),
			zap.Strings("missing", l.Missing), zap.Strings("extra", l.Extra), zap.Strings("changed", l.Changed), zap.String("reason", l.Reason))
	}
	if rr := res.RealRestore; rr != nil {
		log.Info("etcd-backup-restore's restore", zap.String("realRestore", rr.Outcome), zap.String("tool", rr.Tool), zap.String("notRun", rr.NotRun),
			zap.Int64("revision", rr.Revision), zap.Int64("keys", rr.Keys), zap.Strings("missing", rr.Missing), zap.Strings("extra", rr.Extra),
			zap.Strings("changed", rr.Changed), zap.Duration("took", rr.Duration))
	}
	return report
}

// verdict is the DrillsSucceeded condition of a run's reports.
func verdict(reports []backupv1alpha1.EntryDrillResult) (ok bool, reason, message string) {
	if len(reports) == 0 {
		return true, backupv1alpha1.ReasonNothingToDrill, "No BackupEntry and no EtcdBackupConfig is selected"
	}
	var failed []string
	for _, r := range reports {
		if !backupv1alpha1.Passed(r.Outcome) {
			failed = append(failed, fmt.Sprintf("%s %s: %s", r.Entry, r.Outcome, r.Reason))
		}
	}
	if len(failed) == 0 {
		return true, backupv1alpha1.ReasonAllRestorable, fmt.Sprintf("All %d entries drilled restored", len(reports))
	}
	const firstReasons = 3
	message = fmt.Sprintf("%d of %d entries drilled did not pass: %s", len(failed), len(reports),
		strings.Join(failed[:min(len(failed), firstReasons)], "; "))
	if len(failed) > firstReasons {
		message += fmt.Sprintf("; and %d more (status.results)", len(failed)-firstReasons)
	}
	return false, backupv1alpha1.ReasonDrillsFailed, message
}

// setCondition sets DrillsSucceeded at rd's generation.
func setCondition(rd *backupv1alpha1.RestoreDrill, ok bool, reason, message string) {
	kube.SetCondition(&rd.Status.Conditions, rd.Generation, backupv1alpha1.ConditionDrillsSucceeded, ok, reason, message)
}

func newDrill() *backupv1alpha1.RestoreDrill { return &backupv1alpha1.RestoreDrill{} }
