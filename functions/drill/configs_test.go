package drill

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// On a real kube-apiserver, the snapshot function backs up a real etcd for EtcdBackupConfigs
// into a local BackupDestination; then one config's newest backup is cut short, and another's
// db damaged so that bbolt panics reading it (its SHA-256 written anew). A RestoreDrill
// choosing the configs of one namespace by label drills each config's newest backup: the whole
// one restores to the etcd's revision with its keys and values, which the running etcd holds
// (Exact), the cut one is NotRestorable
// naming its object, the damaged one too, naming bbolt's panic (which ends its restore process,
// not the function), the one whose destination does not exist is an Error that says so. A
// config of another namespace, one without the label and one being deleted are not drilled.
// Nothing in the destination changes.
func TestDrillFunctionDrillsConfigs(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	etcd := testenv.StartEtcd(t, 40)
	root := t.TempDir()
	providers := objectstore.NewRegistry(local.New(root))
	const bucketName = "etcd-backups"
	if err := os.MkdirAll(filepath.Join(root, bucketName), 0o755); err != nil {
		t.Fatal(err)
	}

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	for _, ns := range []string{"team", "other"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: bucketName}})
	drilled := map[string]string{"drill": "nightly"}
	config := func(namespace, name, destination string, labels map[string]string) *backupv1alpha1.EtcdBackupConfig {
		cfg := &backupv1alpha1.EtcdBackupConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Finalizers: []string{"test/keep"}},
			Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
				Schedule: "@daily", Keep: 3, Destination: destination},
		}
		create(cfg)
		return cfg
	}
	whole, cut := config("team", "whole", "local", drilled), config("team", "cut", "local", drilled)
	panics := config("team", "panics", "local", drilled)
	lost := config("team", "lost", "nowhere", drilled)
	unlabelled, elsewhere := config("team", "unlabelled", "local", nil), config("other", "whole", "local", drilled)
	deleting := config("team", "deleting", "local", drilled)

	// The snapshot function takes each config's backup, as its schedule's fire would.
	snap := &etcdbackup.Snapshotter{Client: c, Providers: providers, Log: zaptest.NewLogger(t), Now: time.Now}
	backupFire := runner.Fire{At: time.Now().UTC().Add(-time.Minute).Truncate(time.Second)}
	for _, cfg := range []*backupv1alpha1.EtcdBackupConfig{whole, cut, panics, unlabelled, elsewhere, deleting} {
		e, err := events.NewEtcdBackupDueEvent("test", kube.Ref(events.KindEtcdBackupConfig, cfg), cfg.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := snap.Handle(runner.WithFire(ctx, backupFire), e); err != nil {
			t.Fatalf("backing up %s: %v", cfg.Name, err)
		}
	}
	if err := c.Delete(ctx, deleting); err != nil {
		t.Fatal(err)
	}
	cutKey := destination.ConfigKey(cut, backupFire.At)
	path := filepath.Join(root, bucketName, filepath.FromSlash(cutKey))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the snapshot function's backup of %s: %v", cut.Name, err)
	}
	if err := os.Truncate(path, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	panicsKey := destination.ConfigKey(panics, backupFire.At)
	breakBbolt(t, filepath.Join(root, bucketName, filepath.FromSlash(panicsKey)))
	before := treeDigest(t, filepath.Join(root, bucketName))

	// What the backups hold: nothing was written to etcd since they were taken.
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	head, err := ec.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	revision := head.Header.Revision
	keys, kvDigest := sourceDigest(t, ec, revision)

	rd := &backupv1alpha1.RestoreDrill{
		ObjectMeta: metav1.ObjectMeta{Name: "team-configs"},
		Spec: backupv1alpha1.RestoreDrillSpec{
			Configs:  &backupv1alpha1.ConfigSelection{Namespaces: []string{"team"}, Selector: &metav1.LabelSelector{MatchLabels: drilled}},
			Schedule: "@daily", Concurrency: 2,
		},
	}
	create(rd)
	work := t.TempDir()
	d := &Driller{Client: c, Providers: providers, Log: zaptest.NewLogger(t), Now: time.Now, WorkDir: work}
	e, err := events.NewDrillDueEvent("test", kube.Ref(events.KindRestoreDrill, rd), rd.Spec.Schedule, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Handle(runner.WithFire(ctx, runner.Fire{At: time.Now().UTC().Truncate(time.Second)}), e); err != nil {
		t.Fatal(err)
	}

	got := &backupv1alpha1.RestoreDrill{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rd), got); err != nil {
		t.Fatal(err)
	}
	st := got.Status
	results := map[string]backupv1alpha1.EntryDrillResult{}
	for _, r := range st.Results {
		results[r.Entry] = r
	}
	if st.Entries != 4 || st.Restorable != 1 || st.Failed != 3 || len(results) != 4 {
		t.Fatalf("entries %d, restorable %d, failed %d, results %+v: want team/whole, team/cut, team/panics and team/lost (not %s/%s, %s/%s, %s/%s)",
			st.Entries, st.Restorable, st.Failed, st.Results, unlabelled.Namespace, unlabelled.Name,
			elsewhere.Namespace, elsewhere.Name, deleting.Namespace, deleting.Name)
	}
	for name, r := range results {
		if r.Kind != backupv1alpha1.DrilledEtcdBackupConfig {
			t.Errorf("%s: kind %q, want %s", name, r.Kind, backupv1alpha1.DrilledEtcdBackupConfig)
		}
	}
	ok := results["team/whole"]
	if ok.Outcome != backupv1alpha1.OutcomeExact || ok.RestoredRevision != revision || ok.Keys != keys || ok.Hash != kvDigest ||
		ok.NewestRestorablePoint == nil || !ok.NewestRestorablePoint.Time.Equal(backupFire.At) {
		t.Errorf("team/whole: %+v, want Exact at revision %d with %d keys, digest %s, point %s", ok, revision, keys, kvDigest, backupFire.At)
	}
	// The config's etcd, connected to as the snapshot function does, holds what was restored.
	if l := ok.Live; l == nil || l.Outcome != backupv1alpha1.LiveMatches || l.Revision < revision || l.BehindRevisions != l.Revision-revision || l.BehindSeconds < 0 {
		t.Errorf("team/whole's live comparison %+v, want Matches at a revision from %d on, behind by the difference", l, revision)
	}
	if bad := results["team/cut"]; bad.Outcome != backupv1alpha1.OutcomeNotRestorable || bad.Object != cutKey || !strings.Contains(bad.Reason, "truncated") {
		t.Errorf("team/cut: %+v, want NotRestorable naming %s, truncated", bad, cutKey)
	}
	// bbolt's panic, in the process that restored the db: the drill names the snapshot and the
	// panic, and the function, its other drills and this test live on.
	const panicked = "corrupt: restoring its snapshot db: the restore process crashed: panic: freepages: failed to get all reachable pages"
	if bad := results["team/panics"]; bad.Outcome != backupv1alpha1.OutcomeNotRestorable || bad.Object != panicsKey || !strings.Contains(bad.Reason, panicked) {
		t.Errorf("team/panics: %+v, want NotRestorable naming %s and %q", bad, panicsKey, panicked)
	}
	if l := results[lost.Namespace+"/"+lost.Name]; l.Outcome != backupv1alpha1.OutcomeError || !strings.Contains(l.Reason, `BackupDestination "nowhere" does not exist`) {
		t.Errorf("team/lost: %+v, want an Error naming the missing BackupDestination", l)
	}
	cond := meta.FindStatusCondition(st.Conditions, backupv1alpha1.ConditionDrillsSucceeded)
	if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "team/cut NotRestorable") {
		t.Errorf("condition %+v, want False naming team/cut", cond)
	}
	emptyWorkDir(t, work)
	if after := treeDigest(t, filepath.Join(root, bucketName)); !maps.Equal(before, after) {
		t.Errorf("the destination changed: %d files before, %d after", len(before), len(after))
	}
}
