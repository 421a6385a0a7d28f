package drill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// On a real kube-apiserver, a RestoreDrill selects by label three BackupEntries of one local
// bucket, each holding a copy of a chain etcd-backup-restore wrote: one whole, one whose full
// snapshot is cut short, one being deleted. A fire drills the two live ones: the status shows
// one Restorable and one NotRestorable naming the object at fault, the counts and a False
// DrillsSucceeded saying which failed; both drills are timed. The same fire delivered again,
// a forged fire for a RestoreDrill of another uid, and one dated in the future drill nothing and
// write nothing. A drill out of its timeout is an Error that keeps the entry's last restorable
// point. An entry no longer selected leaves the results. Nothing in the bucket changes.
func TestDrillFunction(t *testing.T) {
	b := backUp(t)
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	chain, err := LatestChain(b.keys(t))
	if err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	const bucketName = "drills"
	const uid = "--0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10"
	good, broken, deleting := "shoot--team--good"+uid, "shoot--team--broken"+uid, "shoot--team--gone"+uid
	// backUp's prefix is an entry's: <entry>/etcd-main/.
	source := strings.TrimSuffix(b.prefix, "/etcd-main/v2/")
	for _, name := range []string{good, broken, deleting} {
		copyTree(t, filepath.Join(b.bucket, source), filepath.Join(root, bucketName, name))
	}
	brokenFull := gardener.EntryPrefix(broken) + strings.TrimPrefix(chain.Full.Key, source+"/")
	path := filepath.Join(root, bucketName, filepath.FromSlash(brokenFull))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, filepath.Join(root, bucketName))

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "entry-credentials"}, Data: map[string][]byte{"token": []byte("local")}})
	for _, name := range []string{good, broken, deleting} {
		be := &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"drill": "nightly"}, Finalizers: []string{"test/keep"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "entry-credentials"},
			},
		}
		create(be)
		if name == deleting {
			if err := c.Delete(ctx, be); err != nil {
				t.Fatal(err)
			}
		}
	}
	rd := &backupv1alpha1.RestoreDrill{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: backupv1alpha1.RestoreDrillSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drill": "nightly"}},
			Schedule: "@daily", Concurrency: 2,
		},
	}
	create(rd)

	reg := prometheus.NewRegistry()
	work := t.TempDir()
	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	etcdbrctl, err := NewEtcdbrctl(ctx, filepath.Join(binDir, "etcdbrctl"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Driller{Client: c, Providers: objectstore.NewRegistry(local.New(root)), Log: zaptest.NewLogger(t),
		Metrics: NewMetrics(reg), Now: time.Now, WorkDir: work, Etcdbrctl: etcdbrctl}
	due := func(t *testing.T, ref events.Ref) cloudevents.Event {
		t.Helper()
		e, err := events.NewDrillDueEvent("test", ref, rd.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	live := func(t *testing.T) *backupv1alpha1.RestoreDrill {
		t.Helper()
		got := &backupv1alpha1.RestoreDrill{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rd), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	fire := runner.Fire{At: time.Now().UTC().Truncate(time.Second), Next: time.Now().UTC().Truncate(time.Second).Add(24 * time.Hour)}

	t.Run("a fire drills the selected live entries", func(t *testing.T) {
		if err := d.Handle(runner.WithFire(ctx, fire), due(t, kube.Ref(events.KindRestoreDrill, rd))); err != nil {
			t.Fatal(err)
		}
		got := live(t)
		st := got.Status
		if st.Entries != 2 || st.Restorable != 1 || st.Failed != 1 || st.Stale != 1 || len(st.Results) != 2 {
			t.Fatalf("entries %d, restorable %d, failed %d, stale %d, %d results: want 2, 1, 1, 1 and 2: %+v",
				st.Entries, st.Restorable, st.Failed, st.Stale, len(st.Results), st.Results)
		}
		bad, ok := st.Results[0], st.Results[1]
		if bad.Entry != broken || bad.Outcome != backupv1alpha1.OutcomeNotRestorable || bad.Object != brokenFull || !strings.Contains(bad.Reason, "truncated") {
			t.Errorf("first result %+v, want %s NotRestorable naming %s", bad, broken, brokenFull)
		}
		if ok.Entry != good || ok.Outcome != backupv1alpha1.OutcomeRestorable || ok.RestoredRevision != b.revision ||
			ok.NewestRestorablePoint == nil || !ok.NewestRestorablePoint.Time.Equal(chain.Last().CreatedOn) {
			t.Errorf("second result %+v, want %s Restorable at revision %d, point %s", ok, good, b.revision, chain.Last().CreatedOn)
		}
		// etcd-backup-restore's own restore ran on the same bucket, opened with the same
		// credentials, and restored the same store; the broken entry's replay failed first.
		if want := fmt.Sprintf("etcd-backup-restore v0.44.1 agrees: it restores the same %d keys and values at revision %s", ok.Keys, thousands(b.revision)); ok.RealRestore != want {
			t.Errorf("%s: real restore %q, want %q", good, ok.RealRestore, want)
		}
		if bad.RealRestore != "" {
			t.Errorf("%s: real restore %q, want none: its replay failed", broken, bad.RealRestore)
		}
		cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionDrillsSucceeded)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != backupv1alpha1.ReasonDrillsFailed ||
			!strings.Contains(cond.Message, "1 of 2 entries") || !strings.Contains(cond.Message, broken+" NotRestorable") {
			t.Errorf("condition %+v", cond)
		}
		if st.LastRun == nil || st.LastRun.Time.Before(fire.At) || st.NextRun == nil || !st.NextRun.Time.Equal(fire.Next) {
			t.Errorf("lastRun %v, nextRun %v: want at or after the fire %s, next %s", st.LastRun, st.NextRun, fire.At, fire.Next)
		}
		if bad.NewestRestorablePoint != nil {
			t.Errorf("%s has a restorable point, though no drill of it ever restored", broken)
		}
		if n := histogramCount(t, reg, "housekeeper_drill_duration_seconds"); n != 2 {
			t.Errorf("%d drills timed, want the 2 selected (%s, being deleted, is not)", n, deleting)
		}
		emptyWorkDir(t, work)
	})

	drills := func() uint64 { return histogramCount(t, reg, "housekeeper_drill_duration_seconds") }
	unchanged := func(t *testing.T, what string, handle func() error, wantErr bool) {
		t.Helper()
		rv, n := live(t).ResourceVersion, drills()
		err := handle()
		if (err != nil) != wantErr {
			t.Errorf("%s: error %v, want an error: %v", what, err, wantErr)
		}
		if got := live(t).ResourceVersion; got != rv {
			t.Errorf("%s wrote the status: resourceVersion %s, was %s", what, got, rv)
		}
		if got := drills(); got != n {
			t.Errorf("%s drilled %d entries", what, got-n)
		}
	}
	t.Run("the same fire again drills nothing", func(t *testing.T) {
		unchanged(t, "the fire delivered again", func() error {
			return d.Handle(runner.WithFire(ctx, fire), due(t, kube.Ref(events.KindRestoreDrill, rd)))
		}, false)
	})
	t.Run("a forged fire for another uid drills nothing", func(t *testing.T) {
		ref := kube.Ref(events.KindRestoreDrill, rd)
		ref.UID = "6f1c2d3e-0000-4000-8000-000000000001"
		later := runner.Fire{At: fire.At.Add(time.Second)}
		unchanged(t, "a fire for another uid", func() error { return d.Handle(runner.WithFire(ctx, later), due(t, ref)) }, false)
	})
	t.Run("a forged fire in the future is refused", func(t *testing.T) {
		future := runner.Fire{At: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
		unchanged(t, "a fire an hour ahead", func() error {
			err := d.Handle(runner.WithFire(ctx, future), due(t, kube.Ref(events.KindRestoreDrill, rd)))
			if runner.ClassOf(err) != runner.ClassPermanent {
				t.Errorf("error %v is not permanent", err)
			}
			return err
		}, true)
	})

	// The next fire, a second after the last run started (its status keeps whole seconds).
	nextFire := func(t *testing.T) runner.Fire {
		t.Helper()
		next := runner.Fire{At: live(t).Status.LastRun.Time.Add(time.Second)}
		time.Sleep(time.Until(next.At))
		return next
	}
	t.Run("a drill out of time is an Error that keeps the last restorable point", func(t *testing.T) {
		short := live(t)
		// Long enough to open the bucket; the restore is held past it once its etcd serves.
		short.Spec.Timeout = &metav1.Duration{Duration: 200 * time.Millisecond}
		afterStart = func() { time.Sleep(time.Second) }
		defer func() { afterStart = nil }()
		if err := c.Update(ctx, short); err != nil {
			t.Fatal(err)
		}
		if err := d.Handle(runner.WithFire(ctx, nextFire(t)), due(t, kube.Ref(events.KindRestoreDrill, rd))); err != nil {
			t.Fatal(err)
		}
		got := live(t)
		r := resultOf(t, got, good)
		if r.Outcome != backupv1alpha1.OutcomeError || !strings.Contains(r.Reason, "within its timeout 200ms") || r.Object != "" ||
			r.NewestRestorablePoint == nil || !r.NewestRestorablePoint.Time.Equal(chain.Last().CreatedOn) {
			t.Errorf("result %+v, want an Error saying the timeout, keeping the point %s", r, chain.Last().CreatedOn)
		}
		got.Spec.Timeout = nil
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		emptyWorkDir(t, work)
	})

	t.Run("a memoryBudget above what the container leaves the drills drills nothing", func(t *testing.T) {
		d.Memory = newMemoryGate(768<<20, (&softLimit{math.MaxInt64}).set)
		defer func() { d.Memory = nil }()
		big := live(t)
		budget := resource.MustParse("2Gi")
		big.Spec.MemoryBudget = &budget
		if err := c.Update(ctx, big); err != nil {
			t.Fatal(err)
		}
		n := drills()
		if err := d.Handle(runner.WithFire(ctx, nextFire(t)), due(t, kube.Ref(events.KindRestoreDrill, rd))); err != nil {
			t.Fatal(err)
		}
		got := live(t)
		cond := meta.FindStatusCondition(got.Status.Conditions, backupv1alpha1.ConditionDrillsSucceeded)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != backupv1alpha1.ReasonInvalidDrill ||
			!strings.Contains(cond.Message, "memoryBudget 2Gi is above the 704Mi the drill function may use") {
			t.Errorf("condition %+v, want InvalidDrill naming the budget and the room", cond)
		}
		if drills() != n {
			t.Errorf("%d entries drilled", drills()-n)
		}
		got.Spec.MemoryBudget = nil
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a store with more keys than its drill's share is an Error", func(t *testing.T) {
		tight := live(t)
		budget := resource.MustParse(backupv1alpha1.MinDrillMemoryBudget)
		tight.Spec.MemoryBudget, tight.Spec.Concurrency = &budget, 1
		if err := c.Update(ctx, tight); err != nil {
			t.Fatal(err)
		}
		if err := d.Handle(runner.WithFire(ctx, nextFire(t)), due(t, kube.Ref(events.KindRestoreDrill, rd))); err != nil {
			t.Fatal(err)
		}
		got := live(t)
		if r := resultOf(t, got, good); r.Outcome != backupv1alpha1.OutcomeError || !strings.Contains(r.Reason, "memory share too small: its 31 keys need about 65Mi, above the 64Mi") {
			t.Errorf("result %+v, want an Error naming the keys, their need and the share", r)
		}
		got.Spec.MemoryBudget, got.Spec.Concurrency = nil, 2
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		emptyWorkDir(t, work)
	})

	t.Run("an entry no longer selected leaves the results", func(t *testing.T) {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := c.Get(ctx, client.ObjectKey{Name: good}, be); err != nil {
			t.Fatal(err)
		}
		delete(be.Labels, "drill")
		if err := c.Update(ctx, be); err != nil {
			t.Fatal(err)
		}
		if err := d.Handle(runner.WithFire(ctx, nextFire(t)), due(t, kube.Ref(events.KindRestoreDrill, rd))); err != nil {
			t.Fatal(err)
		}
		st := live(t).Status
		if st.Entries != 1 || st.Failed != 1 || len(st.Results) != 1 || st.Results[0].Entry != broken {
			t.Errorf("entries %d, failed %d, results %+v: want only %s", st.Entries, st.Failed, st.Results, broken)
		}
	})

	if after := treeDigest(t, filepath.Join(root, bucketName)); !maps.Equal(before, after) {
		t.Errorf("the bucket changed: %d files before, %d after", len(before), len(after))
	}
}

// resultOf is the result of entry in rd's status.
func resultOf(t *testing.T, rd *backupv1alpha1.RestoreDrill, entry string) backupv1alpha1.EntryDrillResult {
	t.Helper()
	i := slices.IndexFunc(rd.Status.Results, func(r backupv1alpha1.EntryDrillResult) bool { return r.Entry == entry })
	if i < 0 {
		t.Fatalf("no result of %s: %+v", entry, rd.Status.Results)
	}
	return rd.Status.Results[i]
}

// copyTree copies the directory from to to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeDigest maps every file under dir to the SHA-256 of its content and its mode.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if e.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(sum[:]) + " " + info.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// histogramCount is how many observations the histogram name holds over all its labels.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
