package seed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const (
	// upstreamNamespace holds upstream provider-local's backup controllers (test/bench/upstream)
	// as a Deployment, as gardener deploys provider-local: always on, one replica, leader
	// elected on a Lease in its namespace.
	upstreamNamespace = "provider-local"
	upstreamName      = "gardener-extension-provider-local"
	upstreamImage     = "housekeeper.test/provider-local-backup:bench"
	// upstreamMount is where the pod mounts the buckets' host directory (provider-local's
	// --backupbucket-local-dir and container mount path are one path here).
	upstreamMount = "/var/local-backupbuckets"
	// benchObjects is how many snapshots an entry holds when it is deleted.
	benchObjects = 20
	// benchCooldown is every function's cooldownPeriod here (the chart's default is 300 s, 600 s
	// for the purge): back at zero between samples within a minute. It does not change the
	// pollingInterval, nor anything measured at rest.
	benchCooldown = 5
)

// BenchmarkSeed measures housekeeper as deployed on this node (test/seed's harness: a real
// node, NATS as three pods, KEDA's operator as a pod, the chart installed by hand), beside
// upstream provider-local's BackupBucket and BackupEntry controllers (test/bench/upstream, built
// static into an image) running on the same node as a Deployment, always on, as gardener
// deploys provider-local. Upstream serves the extension class garden (provider-local's
// --extension-classes=garden, as it runs in gardener-operator's runtime cluster) and
// housekeeper the class shoot (its default), so each side's objects are the other's to ignore:
// both run on the same cluster, and neither acts on what the other is measured on.
//
// With every function's pollingInterval at the chart's default (the chart re-applied; only the
// cooldown is shortened, to come back to zero between samples) it prints:
//
//   - cold starts: for each function woken from zero by KEDA for a real change (a BackupBucket,
//     a BackupEntry, a purge come due), its pod created → scheduled → container process
//     started (the process's start time in /proc) → Ready (observed through a watch), and the
//     container's start → the first event settled (the pod's own "cold start" log line, read
//     through the API); upstream's pod rolled out once the same way, its first reconcile of a
//     BackupBucket waiting for it observed through the API;
//   - one change at a time, change → converged as observed through the API and the store:
//     housekeeper from zero, upstream always on; a deleted entry's purge from its due time
//     (retention, the purge function at zero until due) beside upstream's delete → purged;
//   - at rest, after the cooldown: every running pod on the node with its RSS, working set and
//     CPU over an idle window, from the kubelet's summary API through the API server (what an
//     operator sees), housekeeper's (the bridge, the functions at zero) and NATS's and KEDA's
//     (shared infrastructure, shown apart) beside upstream's Deployment.
//
// Run it alone (as root: the node needs it):
//
//	go test -run '^$' -bench BenchmarkSeed -benchtime 1x -timeout 40m -v ./test/seed/
//
// HOUSEKEEPER_BENCH_SEED_SAMPLES (default 3), _RETENTION (30s) and _IDLE (60s) change the
// samples of each measurement, the deleted entries' retention and the idle window.
func BenchmarkSeed(b *testing.B) {
	cfg := seedBenchConfig{
		samples:   testenv.EnvInt(b, "HOUSEKEEPER_BENCH_SEED_SAMPLES", 3),
		retention: testenv.EnvDuration(b, "HOUSEKEEPER_BENCH_SEED_RETENTION", 30*time.Second),
		idle:      testenv.EnvDuration(b, "HOUSEKEEPER_BENCH_SEED_IDLE", 60*time.Second),
	}
	for b.Loop() {
		runSeedBench(b, cfg)
	}
}

type seedBenchConfig struct {
	samples   int
	retention time.Duration
	idle      time.Duration
}

// seedBench is one run: the seed, clients without a client-side rate limit (an observation
// must not wait for one), and the pods' clock.
type seedBench struct {
	b    *testing.B
	s    *seed
	cfg  seedBenchConfig
	c    client.Client
	cs   kubernetes.Interface
	pods *podClock
	// polling is each function's ScaledObject pollingInterval as KEDA was given it (observed).
	polling map[string]int64
}

func runSeedBench(b *testing.B, cfg seedBenchConfig) {
	began := time.Now()
	// Upstream's image is built while the seed starts.
	upstreamTar := make(chan upstreamBuild, 1)
	buildDir := b.TempDir()
	go func() { upstreamTar <- buildUpstreamImage(buildDir) }()

	s := startSeed(b)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	rc := s.node.RESTConfig()
	rc.QPS, rc.Burst = -1, 0
	c, err := client.New(rc, client.Options{Scheme: s.c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	sb := &seedBench{b: b, s: s, cfg: cfg, c: c, cs: cs}
	sb.pods = startPodClock(ctx, b, cs)

	sb.chartDefaultPolling(ctx)
	prefix := func(side string, i int) string { return fmt.Sprintf("shoot--bench--%s%d--%05x", side, i, i) }
	hkEntries, upEntries := make([]string, cfg.samples), make([]string, cfg.samples)
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-credentials", Namespace: "garden"}})
	for i := range cfg.samples {
		hkEntries[i], upEntries[i] = prefix("hk", i), prefix("up", i)
		for _, n := range []string{hkEntries[i], upEntries[i]} {
			s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace(n)}})
		}
	}

	// Upstream: rolled out with a BackupBucket waiting, then one change at a time, warm.
	build := <-upstreamTar
	if build.err != nil {
		b.Fatal(build.err)
	}
	if err := s.node.ImportImages(build.tarball); err != nil {
		b.Fatal(err)
	}
	upCold := sb.deployUpstream(ctx, "bench-up-0")
	upWarm := sb.upstreamChanges(ctx, upEntries)

	// housekeeper: each sample from zero, each change at another point of KEDA's polling
	// cycle (fromZero). Buckets, then entries in the first bucket, then their purges.
	var hkBucket, hkEntry, hkPurge []coldSample
	for i := range cfg.samples {
		name := fmt.Sprintf("bench-hk-%d", i)
		sb.fromZero(ctx, "bucket", i)
		hkBucket = append(hkBucket, sb.observeCold(ctx, coldTarget{
			what: "bucket " + name, namespace: s.namespace, component: "bucket", line: "cold start",
			change:    func() { s.create(ctx, localBucket(name, nil)) },
			converged: func() bool { return sb.bucketSucceeded(ctx, name) },
		}))
	}
	for i, e := range hkEntries {
		sb.fromZero(ctx, "entry", i)
		hkEntry = append(hkEntry, sb.observeCold(ctx, coldTarget{
			what: "entry " + e, namespace: s.namespace, component: "entry", line: "cold start",
			change:    func() { s.create(ctx, newBackupEntryIn("bench-hk-0", e)) },
			converged: func() bool { return sb.entrySucceeded(ctx, e) },
		}))
	}
	for _, e := range hkEntries {
		sb.fill("bench-hk-0", e, benchObjects)
	}
	for i, e := range hkEntries {
		sb.fromZero(ctx, "purge", i)
		hkPurge = append(hkPurge, sb.purgeFromZero(ctx, "bench-hk-0", e))
	}

	// At rest, after the cooldown.
	s.awaitAtRest(ctx, "at rest after the purges")
	rest := sb.atRest(ctx)

	out := os.Stdout
	fmt.Fprintf(out, "\n### housekeeper on a node beside upstream provider-local (BenchmarkSeed, %s)\n", time.Now().UTC().Format(time.DateOnly))
	sb.printCold(out, []coldRow{
		{"housekeeper bucket (woken from zero by KEDA for a BackupBucket)", hkBucket},
		{"housekeeper entry (woken from zero by KEDA for a BackupEntry)", hkEntry},
		{"housekeeper purge (woken from zero by KEDA when the purge came due)", hkPurge},
		{"upstream provider-local (its Deployment applied, a BackupBucket waiting; always on afterwards)", []coldSample{upCold}},
	})
	sb.printChanges(out, hkBucket, hkEntry, hkPurge, upWarm)
	sb.printRest(out, rest)
	fmt.Fprintf(out, "\nThe whole run took %s on %d cores shared with whatever else ran: the numbers are noisy.\n", time.Since(began).Round(time.Second), runtime.NumCPU())
}

// chartDefaultPolling re-applies the chart with every function's pollingInterval at the
// chart's default (the harness installs it polling every 2 s) and the cooldown at
// benchCooldown, and waits until the ScaledObjects say so.
func (sb *seedBench) chartDefaultPolling(ctx context.Context) {
	b, s := sb.b, sb.s
	data, err := chart.FS.ReadFile("values.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var defaults struct {
		Functions map[string]struct {
			PollingInterval int64 `json:"pollingInterval"`
		} `json:"functions"`
	}
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		b.Fatal(err)
	}
	values := maps.Clone(s.values)
	functions := map[string]any{}
	for _, fn := range all.Names() {
		if defaults.Functions[fn].PollingInterval <= 0 {
			b.Fatalf("the chart's values.yaml has no functions.%s.pollingInterval", fn)
		}
		functions[fn] = map[string]any{"cooldownPeriod": benchCooldown}
	}
	values["functions"] = functions
	s.installChart(ctx, values)
	s.values = values
	sb.polling = map[string]int64{}
	for _, fn := range all.Names() {
		want := defaults.Functions[fn].PollingInterval
		s.eventually(time.Minute, fmt.Sprintf("ScaledObject housekeeper-%s polling every %d s", fn, want), func() (bool, string) {
			so := &unstructured.Unstructured{}
			so.SetAPIVersion("keda.sh/v1alpha1")
			so.SetKind("ScaledObject")
			if err := sb.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "housekeeper-" + fn}, so); err != nil {
				return false, err.Error()
			}
			polling, _, _ := unstructured.NestedInt64(so.Object, "spec", "pollingInterval")
			cooldown, _, _ := unstructured.NestedInt64(so.Object, "spec", "cooldownPeriod")
			sb.polling[fn] = polling
			return polling == want && cooldown == benchCooldown, fmt.Sprintf("pollingInterval %d, cooldownPeriod %d", polling, cooldown)
		})
	}
	b.Logf("chart re-applied: KEDA polls bucket every %d s, entry %d s, purge %d s (the chart's defaults), cooldown %d s",
		sb.polling["bucket"], sb.polling["entry"], sb.polling["purge"], benchCooldown)
}

// fromZero waits until every function is at zero, then (i+½)/n of fn's polling interval: the
// i-th of n changes falls at that point of KEDA's polling cycle, which begins about when the
// function reached zero (the scale-down is a poll's). A change's wait for KEDA is between 0 and
// the interval by where it falls: spread over the cycle, the samples' p50 is a typical wait,
// not the worst (a change made as soon as the function is at zero waits almost the whole
// interval).
func (sb *seedBench) fromZero(ctx context.Context, fn string, i int) {
	sb.s.awaitAtRest(ctx, fmt.Sprintf("at rest before %s sample %d", fn, i+1))
	offset := time.Duration((float64(i) + 0.5) / float64(sb.cfg.samples) * float64(sb.polling[fn]) * float64(time.Second))
	sb.b.Logf("%s sample %d: the change %s into KEDA's polling cycle of %d s", fn, i+1, offset.Round(time.Millisecond), sb.polling[fn])
	time.Sleep(offset)
}

// localBucket is a BackupBucket of type local with the credentials garden/local-credentials, of
// the given class (nil: shoot, housekeeper's).
func localBucket(name string, class *extensionsv1alpha1.ExtensionClass) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", Class: class}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"}},
	}
}

func (sb *seedBench) bucketSucceeded(ctx context.Context, name string) bool {
	bb := &extensionsv1alpha1.BackupBucket{}
	if err := sb.c.Get(ctx, client.ObjectKey{Name: name}, bb); err != nil {
		return false
	}
	op := bb.Status.LastOperation
	return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded
}

// entrySucceeded: the entry Succeeded and etcd-backup in its shoot's namespace.
func (sb *seedBench) entrySucceeded(ctx context.Context, name string) bool {
	be := &extensionsv1alpha1.BackupEntry{}
	if err := sb.c.Get(ctx, client.ObjectKey{Name: name}, be); err != nil {
		return false
	}
	if op := be.Status.LastOperation; op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded {
		return false
	}
	return sb.c.Get(ctx, client.ObjectKey{Namespace: shootNamespace(name), Name: entry.SecretName}, &corev1.Secret{}) == nil
}

// purged: the entry gone and nothing left under its prefix in the bucket.
func (sb *seedBench) purged(ctx context.Context, bucketName, name string) bool {
	err := sb.c.Get(ctx, client.ObjectKey{Name: name}, &extensionsv1alpha1.BackupEntry{})
	return apierrors.IsNotFound(err) && count(sb.b, filepath.Join(sb.s.root, bucketName, name)) == 0
}

// fill writes n snapshots under the entry's prefix in the bucket, owned by the functions' user
// (upstream's pod runs as that user too), as etcd-backup-restore writes them.
func (sb *seedBench) fill(bucketName, prefix string, n int) {
	store, err := local.New(sb.s.root).Open(bucketName, nil)
	if err != nil {
		sb.b.Fatal(err)
	}
	for i := range n {
		if err := objectstore.PutBytes(context.Background(), store, fmt.Sprintf("%s/etcd-main/v2/Incr-%d-%d-%d", prefix, i, i+1, 1700000000+i), []byte("snapshot")); err != nil {
			sb.b.Fatal(err)
		}
	}
	chownTree(sb.b, filepath.Join(sb.s.root, bucketName), 65532)
	if got := count(sb.b, filepath.Join(sb.s.root, bucketName, prefix)); got != n {
		sb.b.Fatalf("%d objects under %s/%s after filling %d", got, bucketName, prefix, n)
	}
}

// coldTarget is a change that wakes a pod, and how to tell that it converged.
type coldTarget struct {
	what                 string
	namespace, component string
	// line is the message of the pod's log line carrying started_at_unix_nano (and, for
	// "cold start", total: the process's start → its first event settled).
	line string
	// at is when the change happened, if it was not made by change (a purge's due time).
	at        time.Time
	change    func()
	converged func() bool
	// settledIsConverged: the pod's first event settled is the convergence observed through the
	// API (upstream's first reconcile), not a log line of the pod.
	settledIsConverged bool
}

// coldSample is one wake, each time observed (the watch, the pod's /proc, its log, the API).
type coldSample struct {
	change, created, scheduled, containerStart, ready, processStart, settled, converged time.Time
}

// observeCold makes the change (or takes its time) and observes, until all of it is seen: the
// first pod of the component created after the change, scheduled, its container's process
// started, Ready; its own start and first event settled (its log line); the object converged.
func (sb *seedBench) observeCold(ctx context.Context, t coldTarget) coldSample {
	b := sb.b
	var cs coldSample
	if t.change != nil {
		cs.change = time.Now()
		t.change()
	} else {
		cs.change = t.at
	}
	var (
		pod     *podTimes
		lastLog time.Time
		logErr  error
	)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if cs.converged.IsZero() && t.converged() {
			cs.converged = time.Now()
		}
		if pod == nil {
			pod = sb.pods.firstAfter(t.namespace, t.component, cs.change)
		}
		if pod != nil {
			p := sb.pods.get(pod.uid)
			if cs.processStart.IsZero() && time.Since(lastLog) > 250*time.Millisecond && !p.containerID.IsZero() {
				lastLog = time.Now()
				started, settled, err := sb.logLine(ctx, p.namespace, p.name, t.line)
				logErr = err
				if err == nil {
					cs.processStart, cs.settled = started, settled
				}
			}
			done := !cs.converged.IsZero() && !cs.processStart.IsZero() && !p.ready.IsZero() && !p.processStart.IsZero()
			if done {
				cs.created, cs.scheduled, cs.containerStart, cs.ready = p.created, p.scheduled, p.processStart, p.ready
				if t.settledIsConverged {
					cs.settled = cs.converged
				}
				if cs.settled.IsZero() || cs.scheduled.IsZero() {
					b.Fatalf("%s: pod %s: settled %v, scheduled %v not observed", t.what, p.name, cs.settled, cs.scheduled)
				}
				b.Logf("%s: change → pod %s created %s, scheduled +%s, container process started +%s, Ready +%s; container start → own start %s, → first event settled %s; change → converged %s",
					t.what, p.name, ms(cs.created.Sub(cs.change)), ms(cs.scheduled.Sub(cs.created)), ms(cs.containerStart.Sub(cs.scheduled)),
					ms(cs.ready.Sub(cs.containerStart)), ms(cs.processStart.Sub(cs.containerStart)), ms(cs.settled.Sub(cs.containerStart)), ms(cs.converged.Sub(cs.change)))
				return cs
			}
			if p.gone {
				b.Fatalf("%s: pod %s deleted before everything was observed: %+v (ready %v, process %v %v), log: %v, converged %v",
					t.what, p.name, p, p.ready, p.processStart, p.processErr, logErr, cs.converged)
			}
		}
		if time.Now().After(deadline) {
			var state string
			if pod != nil {
				p := sb.pods.get(pod.uid)
				state = fmt.Sprintf("pod %s: created %v scheduled %v ready %v container %q process %v (%v); log: %v",
					p.name, p.created, p.scheduled, p.ready, p.containerID, p.processStart, p.processErr, logErr)
			} else {
				state = "no pod of " + t.component + " created after the change"
			}
			b.Fatalf("%s: not all observed after 5m: converged %v; %s", t.what, cs.converged, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logLine reads the pod's log through the API and returns, from its line with msg, the
// process's own start and, from a "cold start" line, when it settled its first event.
func (sb *seedBench) logLine(ctx context.Context, namespace, pod, msg string) (started, settled time.Time, err error) {
	raw, err := sb.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return started, settled, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"msg":"`+msg+`"`)) {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var fields map[string]any
		if err := dec.Decode(&fields); err != nil {
			return started, settled, err
		}
		line := map[string]json.Number{}
		for k, v := range fields {
			if n, ok := v.(json.Number); ok {
				line[k] = n
			}
		}
		ns, err := line["started_at_unix_nano"].Int64()
		if err != nil {
			return started, settled, fmt.Errorf("%s's %q line without started_at_unix_nano: %s", pod, msg, sc.Text())
		}
		started = time.Unix(0, ns)
		if total, ok := line["total"]; ok {
			sec, err := total.Float64()
			if err != nil {
				return started, settled, err
			}
			settled = started.Add(time.Duration(sec * float64(time.Second)))
		} else if msg == "cold start" {
			return started, settled, fmt.Errorf("%s's cold start line without total: %s", pod, sc.Text())
		}
		return started, settled, nil
	}
	return started, settled, fmt.Errorf("no %q line in %s's log yet", msg, pod)
}

// purgeFromZero deletes the entry with the retention, checks until its purge is due that the
// purge function stays at zero with every object in place and that the entry function has
// handled the deletion (the purge is scheduled before it is due), then observes the purge
// function's wake from zero and the prefix purged.
func (sb *seedBench) purgeFromZero(ctx context.Context, bucketName, name string) coldSample {
	b, s := sb.b, sb.s
	deleted := time.Now()
	due := s.deleteWithRetention(ctx, name, sb.cfg.retention)
	var entryPod *podTimes
	var entrySettled time.Time
	for time.Now().Before(due) {
		if r := s.replicas(ctx, "purge"); r != 0 {
			b.Fatalf("the purge function at %d replicas %s before the purge of %s is due", r, time.Until(due).Round(time.Second), name)
		}
		if p := sb.pods.firstAfter(s.namespace, "purge", deleted); p != nil {
			b.Fatalf("purge pod %s created %s before the purge of %s is due", p.name, due.Sub(p.created).Round(time.Millisecond), name)
		}
		if left := count(b, filepath.Join(s.root, bucketName, name)); left != benchObjects {
			b.Fatalf("%d of %d objects of %s left %s before its purge is due", left, benchObjects, name, time.Until(due).Round(time.Second))
		}
		if entryPod == nil {
			entryPod = sb.pods.firstAfter(s.namespace, "entry", deleted)
		}
		if entryPod != nil && entrySettled.IsZero() {
			if _, settled, err := sb.logLine(ctx, entryPod.namespace, entryPod.name, "cold start"); err == nil {
				entrySettled = settled
			}
		}
		time.Sleep(min(200*time.Millisecond, max(time.Until(due), time.Millisecond)))
	}
	if entrySettled.IsZero() || entrySettled.After(due) {
		b.Fatalf("the entry function had not settled the deletion of %s by its purge's due time (pod %v, settled %v): the purge would be scheduled late; raise HOUSEKEEPER_BENCH_SEED_RETENTION (%s)",
			name, entryPod, entrySettled, sb.cfg.retention)
	}
	b.Logf("%s deleted with retention %s: the entry function settled the deletion %s before due; the purge function at 0 and %d objects in place until due",
		name, sb.cfg.retention, due.Sub(entrySettled).Round(time.Millisecond), benchObjects)
	return sb.observeCold(ctx, coldTarget{
		what: "purge of " + name, namespace: s.namespace, component: "purge", line: "cold start", at: due,
		converged: func() bool { return sb.purged(ctx, bucketName, name) },
	})
}

// upstreamBuild is test/bench/upstream's image tarball.
type upstreamBuild struct {
	tarball string
	err     error
}

// buildUpstreamImage builds test/bench/upstream as a static binary and an image of it, as
// scripts/images builds every image here.
func buildUpstreamImage(dir string) upstreamBuild {
	ctx := context.Background() // compiling has no deadline but go test's
	root, err := stack.RepoRoot()
	if err != nil {
		return upstreamBuild{err: err}
	}
	bin := filepath.Join(dir, "provider-local")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/bench/upstream")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return upstreamBuild{err: fmt.Errorf("building test/bench/upstream: %v\n%s", err, out)}
	}
	img, err := images.Binary(ctx, images.Spec{Binary: bin, Path: "/provider-local", Ports: []string{"8080"}})
	if err != nil {
		return upstreamBuild{err: err}
	}
	ref, err := images.ParseReference(upstreamImage)
	if err != nil {
		return upstreamBuild{err: err}
	}
	tarball := filepath.Join(dir, "provider-local.tar")
	if err := images.WriteTarball(ctx, tarball, map[name.Reference]v1.Image{ref: img}); err != nil {
		return upstreamBuild{err: err}
	}
	return upstreamBuild{tarball: tarball}
}

// deployUpstream creates a BackupBucket of class garden for upstream to find, then deploys
// upstream's controllers as gardener's provider-local chart does (the backup controllers' part
// of its ClusterRole, one replica, leader election in its namespace, /readyz on its informers
// synced with the chart's probe timing) and observes the rollout and the first reconcile.
func (sb *seedBench) deployUpstream(ctx context.Context, waiting string) coldSample {
	s := sb.s
	s.create(ctx, localBucket(waiting, ptr.To(extensionsv1alpha1.ExtensionClassGarden)))
	manifest := fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[2]s, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[2]s-backup}
rules:
  - apiGroups: [extensions.gardener.cloud]
    resources: [backupbuckets, backupbuckets/status, backupentries, backupentries/status, clusters]
    verbs: [get, list, watch, patch, update]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create, get, list, watch]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [provider-local-leader-election]
    verbs: [update]
  - apiGroups: [""]
    resources: [namespaces, events, secrets]
    verbs: [create, get, list, watch, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[2]s-backup}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[2]s-backup}
subjects: [{kind: ServiceAccount, name: %[2]s, namespace: %[1]s}]
`, upstreamNamespace, upstreamName)
	for _, obj := range decodeYAML(sb.b, []byte(manifest)) {
		s.apply(ctx, obj)
	}
	deployment := fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: provider-local}}
  template:
    metadata: {labels: {app: provider-local}}
    spec:
      serviceAccountName: %[2]s
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: provider-local
          image: %[3]s
          imagePullPolicy: Never
          args: ["--root=%[4]s", "--addr=:8080", "--leader-elect=true", "--leader-election-namespace=%[1]s", "--extension-classes=garden"]
          ports: [{name: metrics, containerPort: 8080}]
          livenessProbe: {httpGet: {path: /healthz, port: 8080}, initialDelaySeconds: 3, periodSeconds: 5}
          readinessProbe: {httpGet: {path: /readyz, port: 8080}, initialDelaySeconds: 3, periodSeconds: 5}
          securityContext: {allowPrivilegeEscalation: false}
          volumeMounts: [{name: backup-path, mountPath: %[4]s}]
      volumes: [{name: backup-path, hostPath: {path: %[5]s, type: Directory}}]
`, upstreamNamespace, upstreamName, upstreamImage, upstreamMount, s.root)
	objs := decodeYAML(sb.b, []byte(deployment))
	return sb.observeCold(ctx, coldTarget{
		what: "upstream's rollout", namespace: upstreamNamespace, component: "provider-local", line: "starting", settledIsConverged: true,
		change: func() {
			for _, obj := range objs {
				s.apply(ctx, obj)
			}
		},
		converged: func() bool { return sb.bucketSucceeded(ctx, waiting) },
	})
}

// upstreamWarm is upstream's one change at a time, always on.
type upstreamWarm struct {
	bucket, entry, purge []time.Duration
}

// upstreamChanges has upstream (always on) converge one change at a time: a BackupBucket, a
// BackupEntry (Succeeded, etcd-backup written), and the entry's deletion with its prefix
// holding benchObjects snapshots → the entry gone and the prefix empty.
func (sb *seedBench) upstreamChanges(ctx context.Context, entries []string) upstreamWarm {
	s := sb.s
	garden := ptr.To(extensionsv1alpha1.ExtensionClassGarden)
	var w upstreamWarm
	timed := func(what string, change func(), converged func() bool) time.Duration {
		start := time.Now()
		change()
		for !converged() {
			if time.Since(start) > 2*time.Minute {
				sb.b.Fatalf("upstream: %s: not after 2m", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := time.Since(start)
		sb.b.Logf("upstream: %s in %s", what, ms(d))
		return d
	}
	for i := range entries {
		name := fmt.Sprintf("bench-up-%d", i+1)
		w.bucket = append(w.bucket, timed("BackupBucket "+name+" created → Succeeded", func() { s.create(ctx, localBucket(name, garden)) },
			func() bool { return sb.bucketSucceeded(ctx, name) }))
	}
	for _, e := range entries {
		be := newBackupEntryIn("bench-up-0", e)
		be.Spec.Class = garden
		w.entry = append(w.entry, timed("BackupEntry "+e+" created → Succeeded with etcd-backup", func() { s.create(ctx, be) },
			func() bool { return sb.entrySucceeded(ctx, e) }))
	}
	for _, e := range entries {
		sb.fill("bench-up-0", e, benchObjects)
		w.purge = append(w.purge, timed("BackupEntry "+e+" deleted → gone with its prefix empty", func() {
			if err := sb.c.Delete(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: e}}); err != nil {
				sb.b.Fatal(err)
			}
		}, func() bool { return sb.purged(ctx, "bench-up-0", e) }))
	}
	return w
}

// podTimes is when a pod was first seen created, scheduled, its container running and Ready,
// through a watch, and its container's process start, from /proc.
type podTimes struct {
	uid                                types.UID
	namespace, name, component         string
	created, scheduled, running, ready time.Time
	containerID                        containerID
	processStart                       time.Time
	processErr                         error
	lookingUp, gone                    bool
}

type containerID string

func (c containerID) IsZero() bool { return c == "" }

// podClock watches every pod and records the first time each phase of a pod created after it
// started is seen.
type podClock struct {
	mu   sync.Mutex
	pods map[types.UID]*podTimes
}

func startPodClock(ctx context.Context, b *testing.B, cs kubernetes.Interface) *podClock {
	pc := &podClock{pods: map[types.UID]*podTimes{}}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { pc.see(obj, !initial) },
		UpdateFunc: func(_, obj any) { pc.see(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				pc.mu.Lock()
				if t := pc.pods[p.UID]; t != nil {
					t.gone = true
				}
				pc.mu.Unlock()
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("the informer of %v did not sync", typ)
		}
	}
	b.Cleanup(factory.Shutdown)
	return pc
}

// see records what obj shows for the first time; new says it was created while watched.
func (pc *podClock) see(obj any, new bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	t := pc.pods[p.UID]
	if t == nil {
		if !new {
			return // there before the watch: its start is not timed
		}
		component := p.Labels["app.kubernetes.io/component"]
		if component == "" {
			component = p.Labels["app"]
		}
		t = &podTimes{uid: p.UID, namespace: p.Namespace, name: p.Name, component: component, created: now}
		pc.pods[p.UID] = t
	}
	if t.scheduled.IsZero() && p.Spec.NodeName != "" {
		t.scheduled = now
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil && t.running.IsZero() {
			t.running = now
		}
		if _, id, _ := strings.Cut(c.ContainerID, "://"); id != "" && t.containerID.IsZero() {
			t.containerID = containerID(id)
		}
	}
	if t.ready.IsZero() && podReady(p) {
		t.ready = now
	}
	if !t.containerID.IsZero() && !t.lookingUp {
		t.lookingUp = true
		go pc.lookUp(t.uid, string(t.containerID))
	}
}

// lookUp finds the container's process in /proc and records its start.
func (pc *podClock) lookUp(uid types.UID, id string) {
	var (
		start time.Time
		err   error
	)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if start, err = processStart(id); err == nil {
			break
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	t := pc.pods[uid]
	t.processStart, t.processErr = start, err
}

// get is a copy of the pod's times.
func (pc *podClock) get(uid types.UID) podTimes {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return *pc.pods[uid]
}

// firstAfter is the first pod of the component in namespace seen created after t, or nil.
func (pc *podClock) firstAfter(namespace, component string, t time.Time) *podTimes {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var first *podTimes
	for _, p := range pc.pods {
		if p.namespace == namespace && p.component == component && p.created.After(t) && (first == nil || p.created.Before(first.created)) {
			first = p
		}
	}
	if first == nil {
		return nil
	}
	c := *first
	return &c
}

// processStart is when the container's first process started: the earliest start time
// (/proc/<pid>/stat, clock ticks since boot) of the processes in its cgroup, on the wall clock.
func processStart(containerID string) (time.Time, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return time.Time{}, err
	}
	var earliest uint64
	found := false
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !bytes.Contains(cg, []byte(containerID)) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses: starttime is field 22.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		if len(fields) < 20 {
			continue
		}
		ticks, err := strconv.ParseUint(fields[19], 10, 64)
		if err != nil {
			continue
		}
		if !found || ticks < earliest {
			earliest, found = ticks, true
		}
	}
	if !found {
		return time.Time{}, fmt.Errorf("no process of container %s in /proc", containerID)
	}
	uptime, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		return time.Time{}, err
	}
	up, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
	if err != nil {
		return time.Time{}, err
	}
	const ticksPerSecond = 100 // USER_HZ
	return now.Add(-time.Duration((up - float64(earliest)/ticksPerSecond) * float64(time.Second))), nil
}

// kubeletSummary is what the kubelet's /stats/summary says of each pod (the fields used).
type kubeletSummary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			UID       string `json:"uid"`
		} `json:"podRef"`
		CPU *struct {
			Time                 metav1.Time `json:"time"`
			UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds"`
		} `json:"cpu"`
		Memory *struct {
			Time            metav1.Time `json:"time"`
			WorkingSetBytes *uint64     `json:"workingSetBytes"`
			RSSBytes        *uint64     `json:"rssBytes"`
		} `json:"memory"`
	} `json:"pods"`
}

// podUsage is one pod's figures in one summary.
type podUsage struct {
	cpu      uint64 // core nanoseconds
	cpuTime  time.Time
	rss, set uint64
}

// summary reads the kubelet's summary through the API server, as `kubectl get --raw
// /api/v1/nodes/<node>/proxy/stats/summary` does, and returns each pod's usage by UID.
func (sb *seedBench) summary(ctx context.Context) map[types.UID]podUsage {
	raw, err := sb.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", sb.s.node.Name, "proxy", "stats", "summary").DoRaw(ctx)
	if err != nil {
		sb.b.Fatalf("the kubelet's summary: %v", err)
	}
	var sum kubeletSummary
	if err := json.Unmarshal(raw, &sum); err != nil {
		sb.b.Fatalf("the kubelet's summary: %v", err)
	}
	out := map[types.UID]podUsage{}
	for _, p := range sum.Pods {
		var u podUsage
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			u.cpu, u.cpuTime = *p.CPU.UsageCoreNanoSeconds, p.CPU.Time.Time
		}
		if p.Memory != nil && p.Memory.RSSBytes != nil && p.Memory.WorkingSetBytes != nil {
			u.rss, u.set = *p.Memory.RSSBytes, *p.Memory.WorkingSetBytes
		}
		out[types.UID(p.PodRef.UID)] = u
	}
	return out
}

// restRow is a running pod over the idle window.
type restRow struct {
	group, namespace, name string
	rss, set               uint64
	cpu                    time.Duration // CPU time used in the window
	window                 time.Duration // between the two cpu samples
}

// The groups of the at-rest table, in order.
const (
	groupHousekeeper = "housekeeper"
	groupNATS        = "NATS"
	groupKEDA        = "KEDA"
	groupUpstream    = "upstream"
	groupOther       = "other"
)

// atRest samples the kubelet's summary twice, cfg.idle apart, with nothing happening, and
// returns every pod running on the node throughout.
func (sb *seedBench) atRest(ctx context.Context) []restRow {
	b, s := sb.b, sb.s
	time.Sleep(15 * time.Second) // the last scale-down's writes settle
	running := func() map[types.UID]corev1.Pod {
		pods, err := sb.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.node.Name})
		if err != nil {
			b.Fatal(err)
		}
		out := map[types.UID]corev1.Pod{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
				out[p.UID] = p
			}
		}
		return out
	}
	windowStart := time.Now()
	before, first := running(), sb.summary(ctx)
	b.Logf("at rest: %d pods running on %s; watching %s", len(before), s.node.Name, sb.cfg.idle)
	time.Sleep(sb.cfg.idle)
	// The kubelet refreshes its figures every 10–15 s: the second sample must be a newer one.
	var last map[types.UID]podUsage
	s.eventually(time.Minute, "the kubelet's figures refreshed after the window", func() (bool, string) {
		last = sb.summary(ctx)
		for uid := range before {
			if !last[uid].cpuTime.After(first[uid].cpuTime) {
				return false, "pod " + before[uid].Name + " not refreshed"
			}
		}
		return true, ""
	})
	after := running()
	if !maps.EqualFunc(before, after, func(a, b corev1.Pod) bool { return a.UID == b.UID }) {
		b.Fatalf("the running pods changed over the idle window: %v → %v", podNames(before), podNames(after))
	}
	var rows []restRow
	for uid, p := range before {
		f, l := first[uid], last[uid]
		if f.cpuTime.IsZero() || l.cpuTime.IsZero() || l.rss == 0 || l.set == 0 {
			b.Fatalf("the kubelet's summary lacks CPU or memory of pod %s/%s: first %+v, last %+v", p.Namespace, p.Name, f, l)
		}
		r := restRow{namespace: p.Namespace, name: p.Name, rss: l.rss, set: l.set,
			cpu: time.Duration(l.cpu - f.cpu), window: l.cpuTime.Sub(f.cpuTime)}
		switch component := p.Labels["app.kubernetes.io/component"]; {
		case p.Namespace == s.namespace && component == "bridge":
			r.group = groupHousekeeper
			if role := sb.bridgeRole(ctx, p.Name); role != "" {
				r.name += " (" + role + ")"
			}
		case p.Namespace == s.namespace && slices.Contains(all.Names(), component):
			b.Fatalf("function pod %s running at rest", p.Name)
		case p.Namespace == natsNamespace:
			r.group = groupNATS
		case p.Namespace == kedaNamespace:
			r.group = groupKEDA
		case p.Namespace == upstreamNamespace:
			r.group = groupUpstream
		default:
			r.group = groupOther
		}
		rows = append(rows, r)
	}
	order := map[string]int{groupHousekeeper: 0, groupNATS: 1, groupKEDA: 2, groupUpstream: 3, groupOther: 4}
	sort.Slice(rows, func(i, j int) bool {
		if order[rows[i].group] != order[rows[j].group] {
			return order[rows[i].group] < order[rows[j].group]
		}
		return rows[i].name < rows[j].name
	})
	for _, want := range []string{groupHousekeeper, groupNATS, groupKEDA, groupUpstream} {
		if !slices.ContainsFunc(rows, func(r restRow) bool { return r.group == want }) {
			b.Fatalf("no %s pod running at rest: %v", want, podNames(before))
		}
	}
	// Every function at zero throughout: no pod of one appeared in the window either.
	for _, fn := range all.Names() {
		if p := sb.pods.firstAfter(s.namespace, fn, windowStart); p != nil {
			b.Fatalf("function pod %s started during the idle window", p.name)
		}
	}
	return rows
}

// bridgeRole is "leader" when a Lease of the release's namespace is held by the bridge pod,
// "standby" when another holds the bridge's Lease, "" when no Lease names a bridge pod.
func (sb *seedBench) bridgeRole(ctx context.Context, pod string) string {
	leases, err := sb.cs.CoordinationV1().Leases(sb.s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		sb.b.Fatal(err)
	}
	for _, l := range leases.Items {
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		switch {
		case holder == "" || !strings.Contains(l.Name, "bridge"):
		case strings.HasPrefix(holder, pod):
			return "leader"
		case strings.HasPrefix(holder, "housekeeper-bridge-"):
			return "standby"
		}
	}
	return ""
}

func podNames(pods map[types.UID]corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)
	return names
}

type coldRow struct {
	label   string
	samples []coldSample
}

func (sb *seedBench) printCold(w io.Writer, rows []coldRow) {
	fmt.Fprintf(w, "\n#### Cold start on the node (%s), s: p50 / max of n\n\n", sb.s.node.Name)
	fmt.Fprintln(w, "| pod | n | change → pod created | created → scheduled | scheduled → container process started | container started → Ready | container started → the process's own start | container started → first event settled | change → converged (observed) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		col := func(d func(coldSample) time.Duration) string {
			var ds []time.Duration
			for _, s := range r.samples {
				ds = append(ds, d(s))
			}
			return p50max(ds)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.label, len(r.samples),
			col(func(s coldSample) time.Duration { return s.created.Sub(s.change) }),
			col(func(s coldSample) time.Duration { return s.scheduled.Sub(s.created) }),
			col(func(s coldSample) time.Duration { return s.containerStart.Sub(s.scheduled) }),
			col(func(s coldSample) time.Duration { return s.ready.Sub(s.containerStart) }),
			col(func(s coldSample) time.Duration { return s.processStart.Sub(s.containerStart) }),
			col(func(s coldSample) time.Duration { return s.settled.Sub(s.containerStart) }),
			col(func(s coldSample) time.Duration { return s.converged.Sub(s.change) }))
	}
	fmt.Fprintf(w, `
Pod created, scheduled and Ready: first seen through a watch of the API server. Container process
started: the start time of the container's first process in /proc (the runtime creating it,
before the exec). The process's own start and its first event settled: the pod's own log line
("cold start": the event acknowledged; upstream: "starting"), read through the API. Upstream's
first event settled is its first reconcile of the BackupBucket waiting for it, seen converged
through the API (leader election included: the Lease is new). KEDA polls the bucket and entry
functions every %d s and the purge every %d s (the chart's defaults, read back from the
ScaledObjects); change → pod created for a function is mostly that wait, from 0 to the interval
by where the change falls in KEDA's cycle: the i-th of n changes was made (i+½)/n of the
interval after the function reached zero (the scale-down is a poll's), so the samples spread
over the cycle. housekeeper's readiness probe runs every 10 s, upstream's every 5 s after 3 s
(provider-local's chart).
`, sb.polling["bucket"], sb.polling["purge"])
}

func (sb *seedBench) printChanges(w io.Writer, bucketS, entryS, purgeS []coldSample, up upstreamWarm) {
	conv := func(ss []coldSample) string {
		var ds []time.Duration
		for _, s := range ss {
			ds = append(ds, s.converged.Sub(s.change))
		}
		return p50max(ds) + fmt.Sprintf(" (n=%d)", len(ds))
	}
	n := func(ds []time.Duration) string { return p50max(ds) + fmt.Sprintf(" (n=%d)", len(ds)) }
	fmt.Fprintf(w, "\n#### One change at a time, change → converged (observed through the API and the bucket's directory), s: p50 / max\n\n")
	fmt.Fprintf(w, "| change | housekeeper: the function woken from zero by KEDA (polling %d s bucket and entry, %d s purge) | upstream provider-local: always on |\n|---|---:|---:|\n",
		sb.polling["bucket"], sb.polling["purge"])
	fmt.Fprintf(w, "| BackupBucket created → Succeeded | %s | %s |\n", conv(bucketS), n(up.bucket))
	fmt.Fprintf(w, "| BackupEntry created → Succeeded, etcd-backup written | %s | %s |\n", conv(entryS), n(up.entry))
	fmt.Fprintf(w, "| deleted BackupEntry, %d objects: purge due → the prefix empty and the entry gone (upstream: delete → the same) | %s | %s |\n",
		benchObjects, conv(purgeS), n(up.purge))
	fmt.Fprintf(w, `
housekeeper's purge: the entry deleted with a retention of %s, the purge function observed at
zero replicas (no pod) and every object in place until due; due is the deletionTimestamp plus
the retention, when the NATS server delivers the scheduled purge. Upstream provider-local
deletes at once when the BackupEntry is deleted: in a garden, gardenlet deletes it only when
its grace period has passed, so upstream's due → purged is its delete → purged. Converged is
polled through the API server (and the directory) every 20 ms for housekeeper, 10 ms for
upstream.
`, sb.cfg.retention)
}

func (sb *seedBench) printRest(w io.Writer, rows []restRow) {
	mib := func(v uint64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }
	milli := func(cpu, window time.Duration) string {
		return fmt.Sprintf("%.2f", float64(cpu)/float64(window)*1000)
	}
	window := rows[0].window
	fmt.Fprintf(w, "\n#### At rest on the node, after the cooldown: every running pod over %s (the kubelet's summary API through the API server)\n\n", sb.cfg.idle)
	fmt.Fprintln(w, "| pod | namespace | RSS (MiB) | working set (MiB) | CPU (millicores, mean) | CPU (s) in the window |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.3f |\n", r.name, r.namespace, mib(r.rss), mib(r.set), milli(r.cpu, r.window), r.cpu.Seconds())
	}
	total := func(label string, groups ...string) {
		var rss, set uint64
		var milliSum float64
		var cpu time.Duration
		pods := 0
		for _, r := range rows {
			if slices.Contains(groups, r.group) {
				rss, set, cpu, pods = rss+r.rss, set+r.set, cpu+r.cpu, pods+1
				milliSum += float64(r.cpu) / float64(r.window) * 1000
			}
		}
		plural := "s"
		if pods == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "| **%s** | %d pod%s | **%s** | %s | **%.2f** | %.3f |\n", label, pods, plural, mib(rss), mib(set), milliSum, cpu.Seconds())
	}
	total("housekeeper at rest (bridge ×2; every function at 0 replicas, no pod)", groupHousekeeper)
	total("shared infrastructure housekeeper needs: NATS ×3 + KEDA operator", groupNATS, groupKEDA)
	total("housekeeper with NATS and KEDA", groupHousekeeper, groupNATS, groupKEDA)
	total("upstream always-on (provider-local's backup controllers, 1 replica)", groupUpstream)
	fmt.Fprintf(w, `
CPU is the pod's usageCoreNanoSeconds between two of the kubelet's samples about %s apart
(window %s, the functions at zero and upstream idle throughout); RSS and working set are the
pod's at the second sample, as the kubelet reports them from the pod's cgroup: RSS is its
anonymous memory (not the binary's mapped pages, which a process's VmRSS counts), the working
set adds the page cache it recently used (what the kubelet evicts on). Pods include their pause
container. NATS and KEDA are counted apart: a seed may run them for more than housekeeper, and
upstream needs neither.
`, window.Round(time.Second), sb.cfg.idle)
}

// p50max is "p50 / max" in seconds, or the one value.
func p50max(ds []time.Duration) string {
	if len(ds) == 0 {
		return "not observed"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 1 {
		return fmt.Sprintf("%.2f", s[0].Seconds())
	}
	return fmt.Sprintf("%.2f / %.2f", s[(len(s)-1)/2].Seconds(), s[len(s)-1].Seconds())
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
