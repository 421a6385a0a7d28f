package drill

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// On a real kube-apiserver, a RestoreDrill with source Both drills four BackupEntries in their
// local bucket and in the copy a BackupCopyPolicy keeps of them (made by replica.Copy, as the
// copy function makes it), with etcdbrctl reading each store with its own credentials: a whole
// copy restores to the bucket's revision, keys and hash; a copy with a byte of a delta flipped
// is NotRestorable naming the copy and the delta; a copy without its newest delta restores an
// older revision, a lag and a pass; an entry of a bucket the policy does not select is an Error
// naming the policy. With source Copy, the result is the copy's, saying so. Neither store
// changes.
func TestDrillFunctionDrillsTheCopy(t *testing.T) {
	b := backUp(t)
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	chain, err := LatestChain(b.keys(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(chain.Deltas) < 2 {
		t.Fatalf("%d deltas, want 2 at least", len(chain.Deltas))
	}

	root := t.TempDir()
	const bucketName, otherBucket, copyBucket, policy = "drills", "not-copied", "copies", "second"
	const uid = "--0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a11"
	whole, flipped, lagging, uncopied := "shoot--team--whole"+uid, "shoot--team--flipped"+uid, "shoot--team--lagging"+uid, "shoot--team--uncopied"+uid
	source := strings.TrimSuffix(b.prefix, "/etcd-main/v2/")
	inCopy := func(entry string, s Snapshot) string {
		return gardener.EntryPrefix(entry) + strings.TrimPrefix(s.Key, source+"/")
	}
	for _, name := range []string{whole, flipped, lagging} {
		copyTree(t, filepath.Join(b.bucket, source), filepath.Join(root, bucketName, name))
	}
	copyTree(t, filepath.Join(b.bucket, source), filepath.Join(root, otherBucket, uncopied))
	if err := os.MkdirAll(filepath.Join(root, copyBucket), 0o700); err != nil {
		t.Fatal(err)
	}
	providers := objectstore.NewRegistry(local.New(root))
	src, err := local.New(root).Open(bucketName, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := local.New(root).Open(copyBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{whole, flipped, lagging} {
		if _, err := replica.Copy(ctx, src, dst, gardener.EntryPrefix(name)); err != nil {
			t.Fatalf("copying %s: %v", name, err)
		}
	}
	// A byte of the flipped entry's first delta in the copy, its checksum as it was.
	flippedDelta := inCopy(flipped, chain.Deltas[0])
	path := filepath.Join(root, copyBucket, filepath.FromSlash(flippedDelta))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The lagging entry's copy lacks its newest delta: the copy function has not copied it yet.
	if err := os.Remove(filepath.Join(root, copyBucket, filepath.FromSlash(inCopy(lagging, chain.Last())))); err != nil {
		t.Fatal(err)
	}
	lagRevision := chain.Deltas[len(chain.Deltas)-2].LastRevision
	buckets, copies := treeDigest(t, filepath.Join(root, bucketName)), treeDigest(t, filepath.Join(root, copyBucket))

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "credentials"}, Data: map[string][]byte{"token": []byte("local")}})
	ref := corev1.SecretReference{Namespace: "garden", Name: "credentials"}
	for _, name := range []string{bucketName, otherBucket} {
		create(&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local", SecretRef: ref}})
	}
	for _, name := range []string{whole, flipped, lagging, uncopied} {
		bucket := bucketName
		if name == uncopied {
			bucket = otherBucket
		}
		create(&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"drill": "copy", "entry": strings.TrimSuffix(name, uid)}},
			Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucket, Region: "local", SecretRef: ref}})
	}
	create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "copies"}, Spec: backupv1alpha1.BackupDestinationSpec{
		Type: local.Type, Bucket: copyBucket, CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "credentials"}}})
	create(&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets: backupv1alpha1.BucketSelection{Names: []string{bucketName}}, Destination: "copies", Schedule: "@hourly"}})
	rd := &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: "copies"}, Spec: backupv1alpha1.RestoreDrillSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drill": "copy"}},
		Schedule: "@daily", Concurrency: 2, Source: backupv1alpha1.DrillBoth, CopyPolicy: policy}}
	create(rd)

	binDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	etcdbrctl, err := NewEtcdbrctl(ctx, filepath.Join(binDir, "etcdbrctl"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Driller{Client: c, Providers: providers, Log: zaptest.NewLogger(t), Now: time.Now, WorkDir: t.TempDir(), Etcdbrctl: etcdbrctl}
	fire := func(t *testing.T, at time.Time) *backupv1alpha1.RestoreDrill {
		t.Helper()
		e, err := events.NewDrillDueEvent("test", kube.Ref(events.KindRestoreDrill, rd), rd.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Handle(runner.WithFire(ctx, runner.Fire{At: at}), e); err != nil {
			t.Fatal(err)
		}
		got := &backupv1alpha1.RestoreDrill{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rd), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	first := time.Now().UTC().Truncate(time.Second)
	t.Run("source Both", func(t *testing.T) {
		got := fire(t, first)
		r := resultOf(t, got, whole)
		if r.Outcome != backupv1alpha1.OutcomeRestorable || r.Source != "" || r.Copy == nil || r.RestoredRevision != b.revision {
			t.Fatalf("%s: %+v (copy %+v), want Restorable in the bucket at revision %d, the copy beside it", whole, r, r.Copy, b.revision)
		}
		if cp := r.Copy; cp.Source != "copy/"+policy || cp.Outcome != backupv1alpha1.OutcomeRestorable || cp.RestoredRevision != r.RestoredRevision ||
			cp.Keys != r.Keys || cp.Hash != r.Hash || cp.BehindRevisions != 0 || cp.Reason != "" {
			t.Errorf("%s: the copy %+v, want copy/%s Restorable at the bucket's revision %d, %d keys, %s", whole, cp, policy, r.RestoredRevision, r.Keys, r.Hash)
		}
		if !strings.Contains(r.RealRestore, "agrees") {
			t.Errorf("%s: real restore %q, want agrees", whole, r.RealRestore)
		}

		r = resultOf(t, got, flipped)
		if r.Outcome != backupv1alpha1.OutcomeNotRestorable || !strings.HasPrefix(r.Reason, "copy/"+policy+": ") || r.Object != flippedDelta ||
			r.Copy == nil || r.Copy.Outcome != backupv1alpha1.OutcomeNotRestorable || r.Copy.Object != flippedDelta {
			t.Errorf("%s: %+v (copy %+v), want NotRestorable naming copy/%s and %s", flipped, r, r.Copy, policy, flippedDelta)
		}

		r = resultOf(t, got, lagging)
		if r.Outcome != backupv1alpha1.OutcomeRestorable || r.Copy == nil || r.Copy.Outcome != backupv1alpha1.OutcomeRestorable ||
			r.Copy.RestoredRevision != lagRevision || r.Copy.BehindRevisions != b.revision-lagRevision || !strings.Contains(r.Copy.Reason, "a lag") {
			t.Errorf("%s: %+v (copy %+v), want Restorable, the copy at revision %d, %d behind, a lag", lagging, r, r.Copy, lagRevision, b.revision-lagRevision)
		}

		r = resultOf(t, got, uncopied)
		if r.Outcome != backupv1alpha1.OutcomeError || !strings.Contains(r.Reason, "BackupCopyPolicy second does not copy BackupEntry "+uncopied) ||
			!strings.Contains(r.Reason, ErrNotCopied.Error()) || r.Copy == nil || r.Copy.Outcome != backupv1alpha1.OutcomeError {
			t.Errorf("%s: %+v (copy %+v), want an Error naming the policy", uncopied, r, r.Copy)
		}
		if st := got.Status; st.Entries != 4 || st.Restorable != 2 || st.Failed != 2 {
			t.Errorf("entries %d, restorable %d, failed %d; want 4, 2, 2", st.Entries, st.Restorable, st.Failed)
		}
	})

	t.Run("source Copy", func(t *testing.T) {
		only := &backupv1alpha1.RestoreDrill{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rd), only); err != nil {
			t.Fatal(err)
		}
		only.Spec.Source = backupv1alpha1.DrillCopy
		only.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"entry": "shoot--team--whole"}}
		if err := c.Update(ctx, only); err != nil {
			t.Fatal(err)
		}
		// A fire not after the last run's start is one the status has already: after it, then.
		next := only.Status.LastRun.Add(time.Second).Truncate(time.Second)
		time.Sleep(time.Until(next))
		got := fire(t, next)
		r := resultOf(t, got, whole)
		if r.Outcome != backupv1alpha1.OutcomeRestorable || r.Source != "copy/"+policy || r.Copy != nil || r.RestoredRevision != b.revision ||
			!strings.Contains(r.RealRestore, "agrees") {
			t.Errorf("%s: %+v, want Restorable from copy/%s at revision %d, etcdbrctl agreeing", whole, r, policy, b.revision)
		}
	})

	if !maps.Equal(buckets, treeDigest(t, filepath.Join(root, bucketName))) || !maps.Equal(copies, treeDigest(t, filepath.Join(root, copyBucket))) {
		t.Error("a drill changed a store")
	}
}
