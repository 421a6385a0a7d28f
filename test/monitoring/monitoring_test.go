package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const (
	// namespace is the release's, as a seed's extension namespace is named.
	namespace = "extension-housekeeper-monitoring"
	seedName  = "monitoring"
	garden    = "garden"
	// step is the PodMonitor's scrape interval and the rule evaluation interval.
	step = 30 * time.Second
	// retention is the entry's: its purge is pending that long.
	retention = 20 * time.Second
)

// Installed by gardenlet on a seed, housekeeper's alerts and dashboard work on what its processes
// export, as Prometheus itself evaluates them:
//   - every alert's expression and every dashboard query parses, evaluates, and each of its
//     series selectors matches series the running processes exported (labelled as the PodMonitor
//     labels them): an alert or a panel on a series that never exists fails;
//   - dead letters stored fire HousekeeperDeadLetters at once, and it keeps firing while they
//     stay (75 minutes: the former increase()[1h] rule cleared after one hour); once the operator
//     fixes the cause and runs `housekeeper deadletters retry`, it resolves;
//   - a pending purge whose due time passed 10 minutes ago fires HousekeeperPurgeOverdue after
//     5 minutes; once the server fired it and the purge function purged, it resolves;
//   - a RestoreDrill whose status counts an entry stale fires HousekeeperNoRestorableBackup at
//     once, from the bridge's series, and it keeps firing while no drill runs (the 75 minutes);
//     the RestoreDrill deleted, its series go and the alert resolves;
//   - a RestoreDrill of an entry whose full snapshot is cut short, fired once, records it
//     NotRestorable naming that snapshot and fires HousekeeperDrillFailed at once for that
//     entry alone (not for the drill that restored), and it keeps firing while no drill runs;
//     the RestoreDrill deleted, the alert resolves;
//   - a BackupCopyPolicy whose status counts an entry failed and behind, its last complete copy
//     two days old, fires HousekeeperCopyFailed and HousekeeperCopyBehind at once, from the
//     bridge's series, and they keep firing while no copy runs; the policy deleted, they resolve;
//   - a BackupCopyPolicy failed over fires HousekeeperFailedOver, not HousekeeperCopyBehind, its
//     copies stopped two days ago; the policy deleted, it resolves;
//   - no other alert fires on a healthy installation (the bridge leads, nothing backs up, the
//     one entry a RestoreDrill selects restores).
func TestAlertsAndDashboardOnLiveMetrics(t *testing.T) {
	// housekeeper's checkout, which scripts/stack finds its versions and sources from.
	t.Chdir("../..")
	s := renderShipped(t)

	built := make(chan error, 1)
	bin := t.TempDir()
	go func() { built <- stack.BuildHousekeeper(context.Background(), "", bin, true) }()
	env := testenv.Start(t, testenv.WithKube(), testenv.WithNATS())
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	kubeconfig := filepath.Join(env.LogDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	hk := stack.Housekeeper{Bin: bin, Env: []string{"HOUSEKEEPER_NATS_URL=" + env.NATSURL(), "HOUSEKEEPER_KUBECONFIG=" + kubeconfig,
		"HOUSEKEEPER_CLUSTER=" + seedName, "HOUSEKEEPER_TYPES=local"}}
	housekeeper := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "housekeeper"), args...)
		cmd.Env = hk.Environ()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("housekeeper %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	housekeeper("setup")

	root := filepath.Join(env.LogDir, "buckets")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, st: teststorage.New(t), shipped: s}
	w.engine = promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	w.start(env, hk, "bridge", hk.Bridge("--leader-elect=false", "--state-interval", "1s"))
	w.start(env, hk, "bucket", hk.Function("bucket", "--local-root", root))
	for _, fn := range []string{"entry", "purge"} {
		w.start(env, hk, fn, hk.Function(fn, "--local-root", root, "--retention", retention.String()))
	}
	w.start(env, hk, "drill", hk.Function("drill", "--local-root", root))
	w.start(env, hk, "copy", hk.Function("copy", "--local-root", root))
	w.awaitReady()
	w.loadRules()

	// What gardenlet has in place: the garden namespace with the buckets' and entries' secrets,
	// the shoot's control-plane namespace.
	mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: garden}})
	secret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: garden}, StringData: data}
		mustCreate(ctx, t, c, s)
	}
	secret("bucket-ok", map[string]string{"token": "test"})
	newBucket := func(name, secretName string, annotations map[string]string) *extensionsv1alpha1.BackupBucket {
		b := &extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
				SecretRef: corev1.SecretReference{Name: secretName, Namespace: garden},
			},
		}
		mustCreate(ctx, t, c, b)
		return b
	}
	ok := newBucket("monitoring-ok", "bucket-ok", nil)
	// Dead-lettered: its generated secret's namespace does not exist (a permanent error).
	dead := newBucket("monitoring-dead", "bucket-ok", map[string]string{bucket.AnnotationGeneratedSecretNamespace: "not-yet"})
	// Retried: a file stands where its directory goes, until it is removed.
	blocker := filepath.Join(root, "monitoring-late")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	late := newBucket("monitoring-late", "bucket-ok", nil)
	w.eventually("the late bucket's deliveries failing and retried", func() (bool, string) {
		v := w.value("bucket", `housekeeper_function_failed_total{class="retryable"}`)
		return v > 0, fmt.Sprint(v)
	})
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	w.succeeded(ctx, c, ok, late)
	w.eventually("a dead letter of the bucket function, read by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_deadletter_messages{function="bucket"}`)
		return v == 1, fmt.Sprint(v)
	})

	// An entry as gardenlet creates it for a shoot, with its secret and the shoot's namespace,
	// labelled for the RestoreDrills below.
	newEntry := func(name, secretName string, labels map[string]string) *extensionsv1alpha1.BackupEntry {
		e := &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", BucketName: ok.Name,
				SecretRef: corev1.SecretReference{Name: secretName, Namespace: garden},
			},
		}
		mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gardener.EntryNamespace(e.Name),
			Annotations: map[string]string{v1beta1constants.ShootUID: gardener.EntryShootUID(e.Name)}}})
		secret(secretName, map[string]string{"token": "test", "bucketName": ok.Name})
		mustCreate(ctx, t, c, e)
		w.succeeded(ctx, c, e)
		return e
	}
	entry := newEntry("shoot--dev--monitoring--6f1c2d3e-0000-4000-8000-000000000001", "entry-monitoring", nil)

	// A RestoreDrill selecting the entries labelled drill=name, fired once as the scheduler fires
	// it: the drill function drills them and writes its status.
	_, js := env.Connect(t)
	newDrill := func(name string) *backupv1alpha1.RestoreDrill {
		rd := &backupv1alpha1.RestoreDrill{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.RestoreDrillSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drill": name}}, Schedule: "@daily",
			},
		}
		mustCreate(ctx, t, c, rd)
		due, err := events.NewDrillDueEvent(seedName, kube.Ref(events.KindRestoreDrill, rd), rd.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := events.Encode(due)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		return rd
	}

	// A RestoreDrill of a second entry, whose shoot's etcd etcd-backup-restore backed up into the
	// bucket, fired once: the drill restores it, and its series are there for the checks below.
	drilled := newEntry("shoot--dev--drilled--6f1c2d3e-0000-4000-8000-000000000002", "entry-drilled", map[string]string{"drill": "monitoring"})
	testenv.BackUpEtcd(t, env.LogDir, root, ok.Name, gardener.EtcdMainPrefix(drilled.Name))
	newDrill("monitoring")
	w.eventually("the drill restored the entry's backups, its status exported by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_drill_entry_last_success{drill="monitoring"}`)
		return v == 1, fmt.Sprint(v)
	})

	// A RestoreDrill of a third entry, backed up as the second, whose full snapshot is then cut to
	// half under its own name (as an upload cut short leaves it): a real drill, not a status
	// written by hand, finds the backup NotRestorable and names the object.
	brokenEntry := newEntry("shoot--dev--broken--6f1c2d3e-0000-4000-8000-000000000003", "entry-broken", map[string]string{"drill": "broken"})
	testenv.BackUpEtcd(t, env.LogDir, root, ok.Name, gardener.EtcdMainPrefix(brokenEntry.Name))
	fulls, err := filepath.Glob(filepath.Join(root, ok.Name, filepath.FromSlash(gardener.EtcdMainPrefix(brokenEntry.Name)), "v2", "Full-*"))
	if err != nil || len(fulls) != 1 {
		t.Fatalf("the broken entry's full snapshots: %v %v", fulls, err)
	}
	info, err := os.Stat(fulls[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(fulls[0], info.Size()/2); err != nil {
		t.Fatal(err)
	}
	brokenFull := gardener.EtcdMainPrefix(brokenEntry.Name) + "/v2/" + filepath.Base(fulls[0])
	broken := newDrill("broken")
	w.eventually("the drill failed the broken entry, its status exported by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_drill_entry_last_success{drill="broken"}`)
		return v == 0, fmt.Sprint(v)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(broken), broken); err != nil {
		t.Fatal(err)
	}
	if r := broken.Status.Results; len(r) != 1 || r[0].Entry != brokenEntry.Name || r[0].Outcome != backupv1alpha1.OutcomeNotRestorable || r[0].Object != brokenFull {
		t.Fatalf("the broken drill's results %+v, want %s NotRestorable naming %s", r, brokenEntry.Name, brokenFull)
	}

	// A BackupCopyPolicy of the bucket, run on demand: the copy function copies its entries'
	// backups to a second local bucket, and its series are there for the checks below.
	if err := os.MkdirAll(filepath.Join(root, "monitoring-copy"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustCreate(ctx, t, c, &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-copy"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: "local", Bucket: "monitoring-copy"}})
	mustCreate(ctx, t, c, &backupv1alpha1.BackupCopyPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "monitoring", Annotations: map[string]string{gardener.AnnotationOperation: gardener.OperationReconcile}},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{ok.Name}},
			Destination: "monitoring-copy", Schedule: "@daily"},
	})
	w.eventually("the copy function copied the bucket's entries", func() (bool, string) {
		v := w.value("copy", `housekeeper_copy_objects_total{policy="monitoring"}`)
		return v > 0, fmt.Sprint(v)
	})

	// A RestoreDrill whose last run found its one entry without a restorable point (no drill of
	// it ever restored): its status says so, and the bridge exports it while no drill runs.
	stale := &backupv1alpha1.RestoreDrill{
		ObjectMeta: metav1.ObjectMeta{Name: "stale"},
		Spec: backupv1alpha1.RestoreDrillSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drill": "stale"}}, Schedule: "@daily",
		},
	}
	mustCreate(ctx, t, c, stale)
	stale.Status = backupv1alpha1.RestoreDrillStatus{LastRun: &metav1.Time{Time: time.Now()}, Entries: 1, Stale: 1}
	if err := c.Status().Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	w.eventually("the stale drill exported by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_drill_entries{drill="stale", state="stale"}`)
		return v == 1, fmt.Sprint(v)
	})
	// A BackupCopyPolicy whose last run left its one entry not wholly copied, and whose last
	// complete copy is two days old: its status says so, and the bridge exports it between runs.
	lagging := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "lagging"},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{"elsewhere"}},
			Destination: "monitoring-copy", Schedule: "@daily"}}
	mustCreate(ctx, t, c, lagging)
	twoDaysAgo := metav1.NewTime(time.Now().Add(-48 * time.Hour))
	lagging.Status = backupv1alpha1.BackupCopyPolicyStatus{LastRun: &metav1.Time{Time: time.Now()}, Entries: 1, Failed: 1, Behind: 1,
		Results: []backupv1alpha1.EntryCopyResult{{Entry: "shoot--dev--lagging", Bucket: "elsewhere", Time: metav1.Now(),
			LastComplete: &twoDaysAgo, Reason: "1 object differs in the copy"}}}
	if err := c.Status().Update(ctx, lagging); err != nil {
		t.Fatal(err)
	}
	w.eventually("the lagging policy exported by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_copy_policy_entries{policy="lagging", state="behind"}`)
		return v == 1, fmt.Sprint(v)
	})
	// A BackupCopyPolicy failed over, its copies stopped on purpose two days ago: it fires
	// HousekeeperFailedOver, and HousekeeperCopyBehind keeps quiet for it.
	failedOver := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "failed-over"},
		Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Names: []string{"lost"}},
			Destination: "monitoring-copy", Schedule: "@daily", FailOver: true}}
	mustCreate(ctx, t, c, failedOver)
	failedOver.Status = backupv1alpha1.BackupCopyPolicyStatus{LastRun: &twoDaysAgo, Entries: 1,
		Results:  []backupv1alpha1.EntryCopyResult{{Entry: "shoot--dev--lost", Bucket: "lost", Time: twoDaysAgo, Complete: true, LastComplete: &twoDaysAgo}},
		FailOver: &backupv1alpha1.FailOverStatus{Since: metav1.Now(), Phase: backupv1alpha1.FailOverActive}}
	if err := c.Status().Update(ctx, failedOver); err != nil {
		t.Fatal(err)
	}
	w.eventually("the failed-over policy exported by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_copy_policy_failed_over{policy="failed-over"}`)
		return v == 1, fmt.Sprint(v)
	})
	firing := map[string]rules.AlertState{"HousekeeperDeadLetters": rules.StateFiring, "HousekeeperNoRestorableBackup": rules.StateFiring,
		"HousekeeperDrillFailed": rules.StateFiring, "HousekeeperCopyFailed": rules.StateFiring, "HousekeeperCopyBehind": rules.StateFiring,
		"HousekeeperFailedOver": rules.StateFiring}

	// Healthy but for the dead letter, the stale drill and the broken backup: they fire at once
	// (their rules have no for:), nothing else does.
	w.scrape()
	w.expect(firing)
	// The drill that restored its entry is no part of HousekeeperDrillFailed: only the broken is;
	// the policy failed over is no part of HousekeeperCopyBehind, only of HousekeeperFailedOver.
	for name, want := range map[string][]string{"HousekeeperDrillFailed": {"broken " + brokenEntry.Name},
		"HousekeeperCopyBehind": {"lagging"}, "HousekeeperFailedOver": {"failed-over"}} {
		for _, r := range w.rules {
			if r.Name() != name {
				continue
			}
			var active []string
			for _, a := range r.ActiveAlerts() {
				active = append(active, strings.TrimSpace(a.Labels.Get("drill")+" "+a.Labels.Get("entry")+" "+a.Labels.Get("policy")))
			}
			slices.Sort(active)
			if !slices.Equal(active, want) {
				t.Errorf("%s fires for %q, want %q", name, active, want)
			}
		}
	}

	// The entry deleted as gardenlet deletes it: its purge is scheduled.
	deleteConfirmed(ctx, t, c, entry)
	w.eventually("the purge pending, read by the bridge", func() (bool, string) {
		v := w.value("bridge", "housekeeper_purges_pending")
		return v == 1, fmt.Sprint(v)
	})
	w.scrape()
	w.expect(firing)
	// Held as it is for 75 minutes (nothing fires the purge, nobody resolves the dead letter, no
	// drill runs): the purge is overdue, the dead letter still unresolved, the drill still stale,
	// the broken backup's drill still failed.
	w.hold(75 * time.Minute)
	w.expect(map[string]rules.AlertState{"HousekeeperDeadLetters": rules.StateFiring, "HousekeeperPurgeOverdue": rules.StateFiring,
		"HousekeeperNoRestorableBackup": rules.StateFiring, "HousekeeperDrillFailed": rules.StateFiring,
		"HousekeeperCopyFailed": rules.StateFiring, "HousekeeperCopyBehind": rules.StateFiring, "HousekeeperFailedOver": rules.StateFiring})

	// Resolved as it happens: the server fires the purge, the purge function purges; the
	// operator creates the missing namespace and retries the dead letter.
	w.eventually("the purge done", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(entry), &extensionsv1alpha1.BackupEntry{})
		pending, last := w.value("bridge", "housekeeper_purges_pending"), w.value("bridge", "housekeeper_purge_last_success_timestamp_seconds")
		return apierrors.IsNotFound(err) && pending == 0 && last > 0, fmt.Sprintf("entry: %v; pending %v, last success %v", err, pending, last)
	})
	mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-yet"}})
	t.Log(housekeeper("deadletters", "retry", "--function", "bucket", "--all"))
	w.succeeded(ctx, c, dead)
	w.eventually("no dead letter left, read by the bridge", func() (bool, string) {
		v := w.value("bridge", `housekeeper_deadletter_messages{function="bucket"}`)
		return v == 0, fmt.Sprint(v)
	})
	// The stale and the broken drill deleted: their series go with them.
	for _, rd := range []*backupv1alpha1.RestoreDrill{stale, broken} {
		if err := c.Delete(ctx, rd); err != nil {
			t.Fatal(err)
		}
		w.eventually("the deleted drill "+rd.Name+"'s series gone from the bridge", func() (bool, string) {
			v := w.value("bridge", fmt.Sprintf(`housekeeper_drill_entries{drill=%q}`, rd.Name))
			return v == -1, fmt.Sprint(v)
		})
	}
	// The lagging and the failed-over policy deleted: their series go with them.
	for _, p := range []*backupv1alpha1.BackupCopyPolicy{lagging, failedOver} {
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		w.eventually("the deleted policy "+p.Name+"'s series gone from the bridge", func() (bool, string) {
			v := w.value("bridge", fmt.Sprintf(`housekeeper_copy_policy_entries{policy=%q}`, p.Name))
			return v == -1, fmt.Sprint(v)
		})
	}
	w.scrape()
	w.expect(nil)
	w.scrape()
	w.expect(nil)

	// Every selector of every alert and every panel matches series the processes exported.
	for _, r := range w.rules {
		w.selectorsExist("alert "+r.Name(), r.Query().String())
	}
	for _, q := range s.dashboardQueries(t) {
		w.selectorsExist("panel "+q.panel, q.expr)
		if err := w.queryErr(q.expr); err != nil {
			t.Errorf("panel %s: %s: %v", q.panel, q.expr, err)
		}
	}
	// The check itself: a selector on a label value nothing has fails it.
	if missing := w.missingSelectors(`sum(up{job="housekeeper-bridge", component="bridge"}) == 0`); len(missing) != 1 {
		t.Errorf("a selector no process matches is not reported: %v", missing)
	}
}

// shipped is what the chart installs in a seed for monitoring, rendered as gardenlet renders it.
type shipped struct {
	rules     []byte                       // the PrometheusRule's spec, a rule file
	dashboard []byte                       // the dashboard ConfigMap's JSON
	targets   map[string]map[string]string // component → the target labels the PodMonitor gives its pods
}

func renderShipped(t *testing.T) shipped {
	t.Helper()
	values := map[string]any{
		"cluster": seedName, "types": []any{"azure"}, "mode": "keda",
		"monitoring": map[string]any{"enabled": true},
		"gardener":   map[string]any{"seed": map[string]any{"name": seedName}},
	}
	r, err := chart.Render(namespace, values, "v1.36.3")
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	s := shipped{targets: map[string]map[string]string{}}
	var podMonitor *unstructured.Unstructured
	pods := map[string]map[string]string{}
	for _, doc := range strings.Split(string(r.Manifest()), "\n---") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil || obj.Object == nil {
			continue
		}
		switch obj.GetKind() {
		case "PrometheusRule":
			spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
			if s.rules, err = yaml.Marshal(spec); err != nil {
				t.Fatal(err)
			}
		case "PodMonitor":
			podMonitor = obj.DeepCopy()
		case "ConfigMap":
			if obj.GetLabels()["dashboard.monitoring.gardener.cloud/seed"] == "true" {
				data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
				s.dashboard = []byte(data["housekeeper.json"])
			}
		case "Deployment":
			l, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
			pods[strings.TrimPrefix(obj.GetName(), "housekeeper-")] = l
		}
	}
	if s.rules == nil || s.dashboard == nil || podMonitor == nil {
		t.Fatalf("the chart renders no PrometheusRule, dashboard or PodMonitor for a seed")
	}
	// The target labels, as prometheus-operator configures the PodMonitor: the job from the pod
	// label jobLabel names, podTargetLabels as sanitized label names, the relabelings (each a
	// replace of one pod label), and the namespace, pod and instance of every target.
	jobLabel, _, _ := unstructured.NestedString(podMonitor.Object, "spec", "jobLabel")
	podTargetLabels, _, _ := unstructured.NestedStringSlice(podMonitor.Object, "spec", "podTargetLabels")
	endpoints, _, _ := unstructured.NestedSlice(podMonitor.Object, "spec", "podMetricsEndpoints")
	sanitize := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	for component, l := range pods {
		target := map[string]string{"job": l[jobLabel], "namespace": namespace, "pod": "housekeeper-" + component + "-0"}
		for _, name := range podTargetLabels {
			target[sanitize.ReplaceAllString(name, "_")] = l[name]
		}
		for _, e := range endpoints {
			relabelings, _, _ := unstructured.NestedSlice(e.(map[string]any), "relabelings")
			for _, rl := range relabelings {
				rl := rl.(map[string]any)
				src := rl["sourceLabels"].([]any)
				label := strings.TrimPrefix(src[0].(string), "__meta_kubernetes_pod_label_")
				for name, v := range l {
					if sanitize.ReplaceAllString(name, "_") == label {
						target[rl["targetLabel"].(string)] = v
					}
				}
			}
		}
		if target["job"] == "" || target["component"] == "" {
			t.Fatalf("%s: no job or component target label from the PodMonitor: %v", component, target)
		}
		s.targets[component] = target
	}
	return s
}

type dashboardQuery struct{ panel, expr string }

// dashboardQueries are the dashboard's queries with Plutono's variables as a seed resolves them:
// every namespace, the rate interval of two scrapes at least.
func (s shipped) dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	var dash struct {
		Templating struct {
			List []struct{ Name, Query string }
		}
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(s.dashboard, &dash); err != nil {
		t.Fatal(err)
	}
	resolve := strings.NewReplacer("$__rate_interval", "2m", "$namespace", ".*")
	var out []dashboardQuery
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{p.Title, resolve.Replace(tg.Expr)})
		}
	}
	// label_values(metric, label) of a query variable: the metric with the label.
	labelValues := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Query); m != nil {
			out = append(out, dashboardQuery{"variable " + v.Name, fmt.Sprintf(`%s{%s!=""}`, m[1], m[2])})
		}
	}
	return out
}

// world is the processes, scraped into a Prometheus TSDB on a clock of its own: each scrape is a
// step after the last (and never before the real time), hold repeats the last scrape.
type world struct {
	t       *testing.T
	st      *teststorage.TestStorage
	engine  *promql.Engine
	shipped shipped
	targets []*target
	rules   []*rules.AlertingRule
	now     time.Time
	last    []sample
	minT    time.Time
}

type target struct {
	component string
	proc      *stack.Served
}

type sample struct {
	labels labels.Labels
	value  float64
}

func (w *world) start(env *testenv.Env, hk stack.Housekeeper, component string, argv []string) {
	w.t.Helper()
	log, err := os.Create(filepath.Join(env.LogDir, component+".log"))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = log.Close() })
	p, err := hk.Start(component, log, argv...)
	if err != nil {
		w.t.Fatalf("%s: %v", component, err)
	}
	w.t.Cleanup(p.Stop)
	w.targets = append(w.targets, &target{component: component, proc: p})
}

func (w *world) awaitReady() {
	w.t.Helper()
	for _, tg := range w.targets {
		if err := tg.proc.AwaitReady(2 * time.Minute); err != nil {
			w.t.Fatal(err)
		}
	}
}

// loadRules parses the PrometheusRule's groups as Prometheus loads a rule file.
func (w *world) loadRules() {
	w.t.Helper()
	groups, errs := rulefmt.Parse(w.shipped.rules, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	if len(errs) > 0 {
		w.t.Fatalf("the PrometheusRule's groups: %v", errs)
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				w.t.Fatalf("%s: %v", r.Alert, err)
			}
			w.rules = append(w.rules, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, nil))
		}
	}
	if len(w.rules) == 0 {
		w.t.Fatal("no alerting rules")
	}
}

// scrape scrapes every process one step after the last scrape, then evaluates the rules.
func (w *world) scrape() {
	w.t.Helper()
	w.advance()
	var all []sample
	for _, tg := range w.targets {
		all = append(all, w.scrapeTarget(tg)...)
	}
	// A series gone since the last scrape is marked stale, as Prometheus's scraper marks it:
	// it ends at once, not after the lookback delta.
	seen := map[string]bool{}
	for _, s := range all {
		seen[s.labels.String()] = true
	}
	for _, s := range w.last {
		if !seen[s.labels.String()] {
			all = append(all, sample{s.labels, math.Float64frombits(value.StaleNaN)})
		}
	}
	w.last = slices.DeleteFunc(slices.Clone(all), func(s sample) bool { return value.IsStaleNaN(s.value) })
	w.append(all)
	w.eval()
}

// hold repeats the last scrape every step for d, evaluating the rules after each.
func (w *world) hold(d time.Duration) {
	w.t.Helper()
	for end := w.now.Add(d); w.now.Before(end); {
		w.advance()
		w.append(w.last)
		w.eval()
	}
}

func (w *world) advance() {
	next := w.now.Add(step)
	if real := time.Now().Truncate(time.Millisecond); next.Before(real) {
		next = real
	}
	if w.minT.IsZero() {
		w.minT = next
	}
	w.now = next
}

func (w *world) append(samples []sample) {
	w.t.Helper()
	app := w.st.Appender(context.Background())
	for _, s := range samples {
		if _, err := app.Append(0, s.labels, w.now.UnixMilli(), s.value); err != nil {
			w.t.Fatalf("appending %s: %v", s.labels, err)
		}
	}
	if err := app.Commit(); err != nil {
		w.t.Fatal(err)
	}
}

// scrapeTarget reads a process's /metrics as the seed Prometheus does: every sample with the
// PodMonitor's target labels, and up.
func (w *world) scrapeTarget(tg *target) []sample {
	w.t.Helper()
	families := w.families(tg)
	targetLabels := maps.Clone(w.shipped.targets[tg.component])
	if targetLabels == nil {
		w.t.Fatalf("the chart has no pods of component %s", tg.component)
	}
	targetLabels["instance"] = tg.proc.Addr
	var out []sample
	add := func(name string, metric *dto.Metric, value float64, extra ...string) {
		l := maps.Clone(targetLabels)
		for _, lp := range metric.GetLabel() {
			if _, clash := l[lp.GetName()]; clash {
				l["exported_"+lp.GetName()] = lp.GetValue()
				continue
			}
			l[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		l["__name__"] = name
		out = append(out, sample{labels.FromMap(l), value})
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound()))
				}
				add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf")
				add(name+"_sum", m, h.GetSampleSum())
				add(name+"_count", m, float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add(name, m, q.GetValue(), "quantile", formatFloat(q.GetQuantile()))
				}
				add(name+"_sum", m, sm.GetSampleSum())
				add(name+"_count", m, float64(sm.GetSampleCount()))
			}
		}
	}
	add("up", &dto.Metric{}, 1)
	return out
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// families reads a process's /metrics in the text format.
func (w *world) families(tg *target) map[string]*dto.MetricFamily {
	w.t.Helper()
	resp, err := http.Get("http://" + tg.proc.Addr + "/metrics")
	if err != nil {
		w.t.Fatalf("scraping %s: %v", tg.component, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		w.t.Fatalf("%s's /metrics: %v", tg.component, err)
	}
	return families
}

// value is the sum of the series of component's /metrics that selector (a metric selector)
// matches, read now; -1 when none matches.
func (w *world) value(component, selector string) float64 {
	w.t.Helper()
	matchers, err := parser.NewParser(parser.Options{}).ParseMetricSelector(selector)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, tg := range w.targets {
		if tg.component != component {
			continue
		}
		total, found := 0.0, false
		for _, s := range w.scrapeTarget(tg) {
			if matchesAll(matchers, s.labels) {
				total += s.value
				found = true
			}
		}
		if !found {
			return -1
		}
		return total
	}
	w.t.Fatalf("no process %s", component)
	return 0
}

func matchesAll(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (w *world) queryFunc() rules.QueryFunc { return rules.EngineQueryFunc(w.engine, w.st) }

// eval evaluates every rule at the clock's time, as a rule group does each interval.
func (w *world) eval() {
	w.t.Helper()
	for _, r := range w.rules {
		if _, err := r.Eval(context.Background(), 0, w.now, w.queryFunc(), nil, 0); err != nil {
			w.t.Fatalf("evaluating %s at %s: %v", r.Name(), w.now, err)
		}
		r.SetEvaluationTimestamp(w.now)
	}
}

// expect checks every rule's state: those in want as given, all others inactive.
func (w *world) expect(want map[string]rules.AlertState) {
	w.t.Helper()
	for _, r := range w.rules {
		state := rules.StateInactive
		if s, ok := want[r.Name()]; ok {
			state = s
		}
		if got := r.State(); got != state {
			var active []string
			for _, a := range r.ActiveAlerts() {
				active = append(active, fmt.Sprintf("%s=%v since %s", a.Labels, a.Value, a.ActiveAt.Format(time.TimeOnly)))
			}
			w.t.Errorf("at %s: %s is %s, want %s (%s; active: %v)", w.now.Format(time.TimeOnly), r.Name(), got, state, r.Query(), active)
		}
	}
}

// queryErr is the error of evaluating expr now, as a dashboard's instant query.
func (w *world) queryErr(expr string) error {
	q, err := w.engine.NewInstantQuery(context.Background(), w.st, nil, expr, w.now)
	if err != nil {
		return err
	}
	defer q.Close()
	return q.Exec(context.Background()).Err
}

// selectorsExist fails the test for every selector of expr that matches no series scraped.
func (w *world) selectorsExist(where, expr string) {
	w.t.Helper()
	for _, m := range w.missingSelectors(expr) {
		w.t.Errorf("%s: %s matches no series the processes exported (%s)", where, m, expr)
	}
}

func (w *world) missingSelectors(expr string) []string {
	w.t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		w.t.Fatalf("%s: %v", expr, err)
		return nil
	}
	var missing []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		q, err := w.st.Querier(w.minT.UnixMilli(), w.now.UnixMilli())
		if err != nil {
			w.t.Fatal(err)
		}
		defer q.Close()
		if set := q.Select(context.Background(), false, nil, vs.LabelMatchers...); !set.Next() {
			missing = append(missing, vs.String())
		}
		return nil
	})
	sort.Strings(missing)
	return slices.Compact(missing)
}

func (w *world) eventually(what string, cond func() (bool, string)) {
	w.t.Helper()
	testenv.Eventually(w.t, 2*time.Minute, what, cond)
}

// succeeded waits until every object's last operation succeeded.
func (w *world) succeeded(ctx context.Context, c client.Client, objs ...extensionsv1alpha1.Object) {
	w.t.Helper()
	for _, obj := range objs {
		w.eventually(obj.GetName()+" Succeeded", func() (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false, err.Error()
			}
			op := obj.GetExtensionStatus().GetLastOperation()
			if op == nil {
				return false, "no lastOperation"
			}
			return op.State == "Succeeded", fmt.Sprintf("%s %s: %s", op.Type, op.State, op.Description)
		})
	}
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// deleteConfirmed deletes obj as gardener's extensions deletion does: confirmed by annotation.
func deleteConfirmed(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, v1beta1constants.ConfirmationDeletion))
	if err := c.Patch(ctx, obj, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
}
