package copy_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	copyfn "github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

const uid = "--0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10"

// Entries and the etcd-backup-restore-shaped objects under their prefixes: full snapshots,
// deltas (one empty) and etcd-events' backups.
var (
	entryA, entryB = "shoot--dev--a" + uid, "shoot--dev--b" + uid
	entryGone      = "shoot--dev--gone" + uid  // being deleted: not copied
	entryElsewhere = "shoot--dev--other" + uid // in a bucket the policy does not select
	newestA        = entryA + "/etcd-main/v2/Incr-00000181-00000240-1764400600.gz"
	objects        = map[string][]object{
		entryA: {
			{entryA + "/etcd-main/v2/Full-00000000-00000120-1764400000.gz", 300 << 10},
			{entryA + "/etcd-main/v2/Incr-00000121-00000180-1764400300.gz", 40 << 10},
			{newestA, 0},
			{entryA + "/etcd-events/v2/Full-00000000-00000090-1764400010.gz", 70 << 10},
		},
		entryB: {
			{entryB + "/etcd-main/v2/Full-00000000-00000050-1764400000", 1<<20 + 17},
			{entryB + "/etcd-main/v2/Incr-00000051-00000060-1764400300.gz", 9 << 10},
		},
		entryGone:      {{entryGone + "/etcd-main/v2/Full-00000000-00000010-1764300000.gz", 10 << 10}},
		entryElsewhere: {{entryElsewhere + "/etcd-main/v2/Full-00000000-00000010-1764300000.gz", 10 << 10}},
	}
)

type object struct {
	key  string
	size int
}

// content is a deterministic body for key.
func content(key string, size int) []byte {
	b := make([]byte, size)
	seed := sha256.Sum256([]byte(key))
	for i := range b {
		b[i] = seed[i%len(seed)] ^ byte(i>>8)
	}
	return b
}

// On a real kube-apiserver, a BackupCopyPolicy selects one of two local BackupBuckets (by name
// and label: both must match), and its BackupDestination is a bucket of a real S3 server
// (versitygw). A fire copies the backups of the bucket's two live entries, not those of an
// entry being deleted nor of the other bucket's entry; the status says per entry what was
// copied, the newest object, no lag, and both conditions True. The same fire again copies
// nothing, a later one copies nothing and skips everything; a byte flipped in the copy is
// reported, kept, counted, and the entry falls behind its lag objective. A run on demand (the
// annotation gardener.cloud/operation: reconcile) copies a new object and removes the
// annotation. Forged events (a policy that does not exist, another uid, another kind, a fire
// in the future) copy nothing. The entries' bucket never changes.
func TestCopyFunction(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithS3())
	c := env.Client(t)
	ctx := t.Context()
	root := t.TempDir()
	reg := objectstore.NewRegistry(local.New(root), s3.New())

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "seed-local"}, Data: map[string][]byte{"token": []byte("local")}})
	buckets := map[string]map[string]string{"shoots": {"copy": "yes"}, "elsewhere": nil}
	for name, labels := range buckets {
		create(&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
				SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}})
	}
	bucketOf := map[string]string{entryA: "shoots", entryB: "shoots", entryGone: "shoots", entryElsewhere: "elsewhere"}
	for _, name := range slices.Sorted(maps.Keys(bucketOf)) {
		store, err := local.New(root).Open(bucketOf[name], nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Create(ctx); err != nil {
			t.Fatal(err)
		}
		for _, o := range objects[name] {
			if err := objectstore.PutBytes(ctx, store, o.key, content(o.key, o.size)); err != nil {
				t.Fatal(err)
			}
		}
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"test/keep"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketOf[name],
				Region: "local", SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}}
		create(be)
		if name == entryGone {
			if err := c.Delete(ctx, be); err != nil {
				t.Fatal(err)
			}
		}
	}
	sourceBefore := treeDigest(t, root)

	s3Creds := map[string][]byte{s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey), s3.KeyS3ForcePathStyle: []byte("true")}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "second-copy"}, Data: s3Creds})
	create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: s3.Type, Bucket: "second-copy", Endpoint: env.S3.Endpoint, Region: stack.S3Region,
			CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "second-copy"}}})
	s3Creds[s3.KeyEndpoint] = []byte(env.S3.Endpoint)
	dst, err := objectstore.InRegion(s3.New(), stack.S3Region).Open("second-copy", s3Creds)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Create(ctx); err != nil {
		t.Fatal(err)
	}

	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"},
		Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Names: []string{"shoots", "elsewhere"},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}},
			Destination: "second-copy", Schedule: "@hourly", LagObjective: &metav1.Duration{Duration: time.Hour}}}
	create(policy)

	metrics := prometheus.NewRegistry()
	now := time.Now
	cp := &copyfn.Copier{Client: c, Providers: reg, Log: zaptest.NewLogger(t), Metrics: copyfn.NewMetrics(metrics),
		Now: func() time.Time { return now() }}
	due := func(t *testing.T, ref events.Ref) cloudevents.Event {
		t.Helper()
		e, err := events.NewCopyDueEvent("test", ref, policy.Spec.Schedule, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	live := func(t *testing.T) *backupv1alpha1.BackupCopyPolicy {
		t.Helper()
		got := &backupv1alpha1.BackupCopyPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	fireAt := func(at time.Time) runner.Fire {
		at = at.UTC().Truncate(time.Second)
		return runner.Fire{At: at, Next: at.Add(time.Hour)}
	}
	copied := slices.Concat(objects[entryA], objects[entryB])
	wantKeys := make([]string, len(copied))
	var wantBytes int64
	for i, o := range copied {
		wantKeys[i] = o.key
		wantBytes += int64(o.size)
	}
	slices.Sort(wantKeys)

	fire := fireAt(time.Now())
	t.Run("a fire copies the selected buckets' live entries", func(t *testing.T) {
		if err := cp.Handle(runner.WithFire(ctx, fire), due(t, kube.Ref(events.KindBackupCopyPolicy, policy))); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, dst); !slices.Equal(got, wantKeys) {
			t.Fatalf("the copy holds\n%q\nwant\n%q", got, wantKeys)
		}
		for _, o := range copied {
			if got := read(t, dst, o.key); !bytes.Equal(got, content(o.key, o.size)) {
				t.Errorf("%s: the copy's content differs", o.key)
			}
		}
		p := live(t)
		s := p.Status
		if s.Entries != 2 || s.Failed != 0 || s.Behind != 0 || len(s.Results) != 2 || s.LastRun == nil ||
			s.NextRun == nil || !s.NextRun.Time.Equal(fire.Next) {
			t.Fatalf("status %+v", s)
		}
		for _, r := range s.Results {
			want := objects[r.Entry]
			var size int64
			for _, o := range want {
				size += int64(o.size)
			}
			if !r.Complete || r.Bucket != "shoots" || r.Objects != int64(len(want)) || r.Bytes != size || r.Skipped != 0 ||
				r.Lag.Duration != 0 || r.LastComplete == nil || r.Reason != "" || len(r.Failures) != 0 {
				t.Errorf("result %+v", r)
			}
		}
		if r := result(t, p, entryA); r.Newest != newestA {
			t.Errorf("newest object copied of %s: %q, want %q", entryA, r.Newest, newestA)
		}
		condition(t, p, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionTrue, backupv1alpha1.ReasonAllCopied)
		condition(t, p, backupv1alpha1.ConditionWithinLagObjective, metav1.ConditionTrue, backupv1alpha1.ReasonWithinObjective)
		if got := value(t, metrics, "housekeeper_copy_objects_total", "policy", policy.Name); got != float64(len(copied)) {
			t.Errorf("objects copied: %v, want %d", got, len(copied))
		}
		if got := value(t, metrics, "housekeeper_copy_bytes_total", "policy", policy.Name); got != float64(wantBytes) {
			t.Errorf("bytes copied: %v, want %d", got, wantBytes)
		}
	})

	t.Run("the same fire again, and a later one, copy nothing", func(t *testing.T) {
		before := live(t)
		if err := cp.Handle(runner.WithFire(ctx, fire), due(t, kube.Ref(events.KindBackupCopyPolicy, policy))); err != nil {
			t.Fatal(err)
		}
		if p := live(t); p.ResourceVersion != before.ResourceVersion {
			t.Fatalf("the same fire wrote the status again: %+v", p.Status)
		}
		later := fireAt(before.Status.LastRun.Add(time.Second))
		if err := cp.Handle(runner.WithFire(ctx, later), due(t, kube.Ref(events.KindBackupCopyPolicy, policy))); err != nil {
			t.Fatal(err)
		}
		p := live(t)
		if p.ResourceVersion == before.ResourceVersion {
			t.Fatalf("the later fire wrote no status: %+v", p.Status)
		}
		for _, r := range p.Status.Results {
			if !r.Complete || r.Objects != 0 || r.Bytes != 0 || r.Skipped != int64(len(objects[r.Entry])) {
				t.Errorf("a second copy: %+v", r)
			}
		}
		if got := value(t, metrics, "housekeeper_copy_objects_total", "policy", policy.Name); got != float64(len(copied)) {
			t.Errorf("objects copied after a second run: %v, want %d", got, len(copied))
		}
	})

	flipped := objects[entryA][1]
	t.Run("a byte flipped in the copy is reported and kept", func(t *testing.T) {
		bad := content(flipped.key, flipped.size)
		bad[len(bad)/2] ^= 0x01
		if err := objectstore.PutBytes(ctx, dst, flipped.key, bad); err != nil {
			t.Fatal(err)
		}
		// Two hours on: the entry's last complete copy is further behind than its objective.
		now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		defer func() { now = time.Now }()
		if err := cp.Handle(runner.WithFire(ctx, fireAt(now())), due(t, kube.Ref(events.KindBackupCopyPolicy, policy))); err != nil {
			t.Fatal(err)
		}
		if got := read(t, dst, flipped.key); !bytes.Equal(got, bad) {
			t.Error("the differing object in the copy was overwritten")
		}
		p := live(t)
		r := result(t, p, entryA)
		if r.Complete || r.Differing != 1 || len(r.Failures) != 1 || r.Failures[0].Key != flipped.key ||
			!strings.Contains(r.Failures[0].Reason, "differs") || !strings.Contains(r.Reason, "differs") || r.Lag.Duration < 2*time.Hour-time.Minute {
			t.Errorf("result of the entry with a flipped byte: %+v", r)
		}
		if p.Status.Results[0].Entry != entryA || p.Status.Failed != 1 || p.Status.Behind != 1 {
			t.Errorf("status: failed %d, behind %d, results %+v", p.Status.Failed, p.Status.Behind, p.Status.Results)
		}
		if b := result(t, p, entryB); !b.Complete || b.Lag.Duration != 0 {
			t.Errorf("the other entry: %+v", b)
		}
		condition(t, p, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionFalse, backupv1alpha1.ReasonCopiesFailed)
		condition(t, p, backupv1alpha1.ConditionWithinLagObjective, metav1.ConditionFalse, backupv1alpha1.ReasonBehindObjective)
		if got := value(t, metrics, "housekeeper_copy_verification_failures_total", "kind", "differs"); got != 1 {
			t.Errorf("verification failures: %v, want 1", got)
		}
		if got := value(t, metrics, "housekeeper_copy_entry_lag_seconds", "entry", entryA); got < (2*time.Hour).Seconds()-60 {
			t.Errorf("lag of %s: %v s, want about two hours", entryA, got)
		}
		// Put right, the entry is complete again at the next run.
		if err := objectstore.PutBytes(ctx, dst, flipped.key, content(flipped.key, flipped.size)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("on demand", func(t *testing.T) {
		added := object{entryB + "/etcd-main/v2/Incr-00000061-00000070-1764400600.gz", 3 << 10}
		shoots, err := local.New(root).Open("shoots", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := objectstore.PutBytes(ctx, shoots, added.key, content(added.key, added.size)); err != nil {
			t.Fatal(err)
		}
		sourceBefore = treeDigest(t, root)
		changed := func(t *testing.T, p *backupv1alpha1.BackupCopyPolicy) cloudevents.Event {
			t.Helper()
			e, err := events.NewObjectEvent("test", events.OpUpdated, kube.Ref(events.KindBackupCopyPolicy, p), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		// A change without the annotation is the schedule function's.
		before := live(t)
		if err := cp.Handle(ctx, changed(t, before)); err != nil {
			t.Fatal(err)
		}
		if p := live(t); p.ResourceVersion != before.ResourceVersion {
			t.Fatalf("an update without the annotation ran: %+v", p.Status)
		}
		patch := client.MergeFrom(before.DeepCopy())
		metav1.SetMetaDataAnnotation(&before.ObjectMeta, gardener.AnnotationOperation, copyfn.RunNow)
		if err := c.Patch(ctx, before, patch); err != nil {
			t.Fatal(err)
		}
		e := changed(t, before)
		if err := cp.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		p := live(t)
		if _, ok := p.Annotations[gardener.AnnotationOperation]; ok {
			t.Errorf("the annotation is left: %v", p.Annotations)
		}
		if r := result(t, p, entryB); !r.Complete || r.Objects != 1 || r.Bytes != int64(added.size) || r.Newest != added.key {
			t.Errorf("on demand, %s: %+v", entryB, r)
		}
		if r := result(t, p, entryA); !r.Complete || r.Lag.Duration != 0 {
			t.Errorf("on demand, %s put right: %+v", entryA, r)
		}
		condition(t, p, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionTrue, backupv1alpha1.ReasonAllCopied)
		if !p.Status.NextRun.Equal(before.Status.NextRun) {
			t.Errorf("a run on demand moved nextRun from %v to %v", before.Status.NextRun, p.Status.NextRun)
		}
		// Delivered again, it finds no annotation.
		if err := cp.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		if again := live(t); again.ResourceVersion != p.ResourceVersion {
			t.Errorf("the run on demand ran again: %+v", again.Status)
		}
		wantKeys = append(wantKeys, added.key)
		slices.Sort(wantKeys)
	})

	// The second store refusing writes (its credentials rotated under the policy), then back; an
	// object removed from the copy: each run on demand reports what it could not copy, keeps what
	// is there, and the next run repairs it.
	t.Run("a refusing destination and a removed object are reported and repaired", func(t *testing.T) {
		runNow := func(t *testing.T) *backupv1alpha1.BackupCopyPolicy {
			t.Helper()
			p := live(t)
			patch := client.MergeFrom(p.DeepCopy())
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, gardener.AnnotationOperation, copyfn.RunNow)
			if err := c.Patch(ctx, p, patch); err != nil {
				t.Fatal(err)
			}
			e, err := events.NewObjectEvent("test", events.OpUpdated, kube.Ref(events.KindBackupCopyPolicy, p), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Handle(ctx, e); err != nil {
				t.Fatal(err)
			}
			return live(t)
		}
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "second-copy"}, secret); err != nil {
			t.Fatal(err)
		}
		good := maps.Clone(secret.Data)
		secret.Data[s3.KeySecretAccessKey] = []byte("not-the-key")
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		removed := objects[entryB][0]
		if failed, err := dst.DeleteKeys(ctx, []string{removed.key}); err != nil || len(failed) != 0 {
			t.Fatal(err, failed)
		}
		p := runNow(t)
		for _, r := range p.Status.Results {
			if r.Complete || r.Reason == "" || strings.Contains(r.Reason, "not-the-key") {
				t.Errorf("with the destination refusing, %s: %+v; want incomplete, the reason without the credential", r.Entry, r)
			}
		}
		condition(t, p, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionFalse, backupv1alpha1.ReasonCopiesFailed)
		t.Logf("with the destination refusing: %s", meta.FindStatusCondition(p.Status.Conditions, backupv1alpha1.ConditionCopiesSucceeded).Message)
		if got := keys(t, dst); slices.Contains(got, removed.key) || len(got) != len(wantKeys)-1 {
			t.Errorf("the refusing destination holds %d objects (the removed one: %v), want the %d it held", len(got), slices.Contains(got, removed.key), len(wantKeys)-1)
		}

		secret.Data = good
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		p = runNow(t)
		if r := result(t, p, entryB); !r.Complete || r.Objects != 1 || r.Skipped != int64(len(objects[entryB])) {
			t.Errorf("with the destination back, %s: %+v; want the removed object copied again, the rest verified", entryB, r)
		}
		if r := result(t, p, entryA); !r.Complete || r.Objects != 0 {
			t.Errorf("with the destination back, %s: %+v", entryA, r)
		}
		condition(t, p, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionTrue, backupv1alpha1.ReasonAllCopied)
		if got := keys(t, dst); !slices.Equal(got, wantKeys) {
			t.Errorf("the copy holds\n%q\nwant\n%q", got, wantKeys)
		}
		if got := read(t, dst, removed.key); !bytes.Equal(got, content(removed.key, removed.size)) {
			t.Errorf("%s copied again with other content", removed.key)
		}
	})

	t.Run("forged events copy nothing", func(t *testing.T) {
		before := live(t)
		ref := kube.Ref(events.KindBackupCopyPolicy, before)
		missing := ref
		missing.Name, missing.UID = "no-such-policy", "5e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b"
		other := ref
		other.UID = "5e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b"
		// A fire the policy's run would take, were the event not forged.
		soon := fireAt(time.Now().Add(30 * time.Second))
		for name, handle := range map[string]func() error{
			"a policy that does not exist": func() error { return cp.Handle(runner.WithFire(ctx, soon), due(t, missing)) },
			"another uid":                  func() error { return cp.Handle(runner.WithFire(ctx, soon), due(t, other)) },
			"a fire in the future": func() error {
				return cp.Handle(runner.WithFire(ctx, fireAt(time.Now().Add(time.Hour))), due(t, ref))
			},
			"a bucket named as the policy": func() error {
				e := due(t, ref)
				e.SetExtension(events.ExtKind, string(events.KindBackupBucket))
				e.SetExtension(events.ExtName, "elsewhere")
				return cp.Handle(runner.WithFire(ctx, soon), e)
			},
		} {
			err := handle()
			if name == "a fire in the future" || name == "a bucket named as the policy" {
				if runner.ClassOf(err) != runner.ClassPermanent {
					t.Errorf("%s: %v, want a permanent error", name, err)
				}
			} else if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if p := live(t); p.ResourceVersion != before.ResourceVersion {
			t.Errorf("a forged event wrote the status: %+v", p.Status)
		}
		if got := keys(t, dst); !slices.Equal(got, wantKeys) {
			t.Errorf("the copy holds\n%q\nwant\n%q", got, wantKeys)
		}
	})

	t.Run("a destination among the selected buckets copies nothing", func(t *testing.T) {
		create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "shoots-again"},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: local.Type, Bucket: "shoots"}})
		self := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "into-itself"},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Types: []string{local.Type}},
				Destination: "shoots-again", Schedule: "@hourly"}}
		create(self)
		if err := cp.Handle(runner.WithFire(ctx, fireAt(time.Now())), due(t, kube.Ref(events.KindBackupCopyPolicy, self))); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(self), self); err != nil {
			t.Fatal(err)
		}
		condition(t, self, backupv1alpha1.ConditionCopiesSucceeded, metav1.ConditionFalse, backupv1alpha1.ReasonInvalidPolicy)
		if len(self.Status.Results) != 0 {
			t.Errorf("results %+v", self.Status.Results)
		}
	})

	if after := treeDigest(t, root); !maps.Equal(after, sourceBefore) {
		t.Errorf("the entries' buckets changed:\nbefore %v\nafter  %v", sourceBefore, after)
	}
}

func keys(t *testing.T, s objectstore.Store) []string {
	t.Helper()
	var all []string
	if err := s.List(t.Context(), "", func(page []string) error { all = append(all, page...); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	return all
}

func read(t *testing.T, s objectstore.Store, key string) []byte {
	t.Helper()
	r, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// treeDigest is every file under dir by its path relative to dir: its SHA-256.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func result(t *testing.T, p *backupv1alpha1.BackupCopyPolicy, entry string) backupv1alpha1.EntryCopyResult {
	t.Helper()
	i := slices.IndexFunc(p.Status.Results, func(r backupv1alpha1.EntryCopyResult) bool { return r.Entry == entry })
	if i < 0 {
		t.Fatalf("no result for %s: %+v", entry, p.Status.Results)
	}
	return p.Status.Results[i]
}

func condition(t *testing.T, p *backupv1alpha1.BackupCopyPolicy, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != p.Generation {
		t.Errorf("condition %s: %+v, want %s %s", typ, c, status, reason)
	}
}

// value is the sum of the samples of the metric name with the label given.
func value(t *testing.T, reg *prometheus.Registry, name, label, labelValue string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == labelValue {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}
