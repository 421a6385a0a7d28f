package entry_test

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// On a real kube-apiserver, an entry of a local bucket that a BackupCopyPolicy copies to a
// BackupDestination on a real S3 server (versitygw), a second policy whose destination does
// not exist, and a third whose destination has object lock, one of the entry's snapshots
// locked there for an hour. A forged purge of the live neighbour deletes nothing anywhere. With the
// destination's credentials wrong, the due purge fails: the entry keeps its finalizer, lastError
// names the destination (and no credential), the failure is counted, the error is an outage's
// (retried, never dead-lettered), and neither store lost anything: the copy is purged before
// the bucket; the same with the destination's endpoint unreachable (a stopped store). With the credentials right again, the same purge empties the entry's prefix in
// both stores, verified by listing, leaves the neighbour whose name differs only by the missing
// "/" in both, and releases the entry; the destination that does not exist delays nothing, and
// in the locked one the locked snapshot stays, marked for deletion, and delays nothing either.
func TestPurgeAlsoPurgesTheCopies(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithS3())
	c := env.Client(t)
	ctx := t.Context()
	root := t.TempDir()
	providers := objectstore.NewRegistry(local.New(root), s3.New())
	const bucketName, uid = "shoots", "--9d1e2f3a-0000-4000-8000-00000000c0b1"
	target, neighbour := "shoot--dev--gone"+uid, "shoot--dev--gone"+uid+"1" // the neighbour's name: the target's without the "/"
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}

	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "seed-local"}, Data: map[string][]byte{"token": []byte("local")}})
	create(&extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName, Labels: map[string]string{"copy": "yes"}},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}})
	s3Creds := map[string][]byte{s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey), s3.KeyS3ForcePathStyle: []byte("true")}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "second-copy"}, Data: s3Creds})
	create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: s3.Type, Bucket: "second-copy", Endpoint: env.S3.Endpoint, Region: stack.S3Region,
			CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "second-copy"}}})
	create(&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second-copy"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets:     backupv1alpha1.BucketSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}},
		Destination: "second-copy", Schedule: "@daily"}})
	create(&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets: backupv1alpha1.BucketSelection{Names: []string{bucketName}}, Destination: "nowhere", Schedule: "@daily"}})
	// A third copy, in a bucket with object lock, one of the target's snapshots locked for an hour.
	create(&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "locked-copy"},
		Spec: backupv1alpha1.BackupDestinationSpec{Type: s3.Type, Bucket: "locked-copy", Endpoint: env.S3.Endpoint, Region: stack.S3Region,
			CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "locked-copy"}}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "locked-copy"}, Data: s3Creds})
	create(&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "locked-copy"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets: backupv1alpha1.BucketSelection{Types: []string{local.Type}}, Destination: "locked-copy", Schedule: "@daily"}})

	first, err := local.New(root).Open(bucketName, nil)
	if err != nil {
		t.Fatal(err)
	}
	withEndpoint := map[string][]byte{s3.KeyEndpoint: []byte(env.S3.Endpoint)}
	for k, v := range s3Creds {
		withEndpoint[k] = v
	}
	copyStore, err := objectstore.InRegion(s3.New(), stack.S3Region).Open("second-copy", withEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	targetKeys, neighbourKeys := snapshots(target+"/", 3), snapshots(neighbour+"/", 2)
	for _, store := range []objectstore.Store{first, copyStore} {
		if err := store.Create(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range slices.Concat(targetKeys, neighbourKeys) {
			if err := objectstore.PutBytes(ctx, store, k, []byte("snapshot of "+k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw := env.S3.Client(nil)
	if _, err := raw.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("locked-copy"), ObjectLockEnabledForBucket: aws.Bool(true),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(stack.S3Region)}}); err != nil {
		t.Fatal(err)
	}
	lockedKey := targetKeys[0]
	for _, k := range slices.Concat(targetKeys, neighbourKeys) {
		in := &awss3.PutObjectInput{Bucket: aws.String("locked-copy"), Key: aws.String(k), Body: strings.NewReader("snapshot of " + k)}
		if k == lockedKey {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = s3types.ObjectLockModeGovernance, aws.Time(time.Now().Add(time.Hour))
		}
		if _, err := raw.PutObject(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	lockedCopy, err := objectstore.InRegion(s3.New(), stack.S3Region).Open("locked-copy", withEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	keysOf := func(store objectstore.Store, prefix string) []string {
		t.Helper()
		var keys []string
		if err := store.List(ctx, prefix, func(page []string) error { keys = append(keys, page...); return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		return keys
	}
	// The target's prefix and the neighbour's in both stores, as the test expects them.
	holds := func(t *testing.T, what string, wantTarget bool) {
		t.Helper()
		for name, store := range map[string]objectstore.Store{"the bucket": first, "the copy": copyStore} {
			want := slices.Clone(neighbourKeys)
			if wantTarget {
				want = slices.Sorted(slices.Values(slices.Concat(targetKeys, neighbourKeys)))
			}
			if got := keysOf(store, "shoot--dev--gone"); !slices.Equal(got, want) {
				t.Errorf("%s: %s holds\n%q\nwant\n%q", what, name, got, want)
			}
		}
	}

	for _, name := range []string{target, neighbour} {
		create(&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{entry.Finalizer},
			Annotations: map[string]string{entry.AnnotationRetention: "0s"}},
			Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, BucketName: bucketName,
				Region: "local", SecretRef: corev1.SecretReference{Namespace: "garden", Name: "seed-local"}}})
	}
	live := func(name string) *extensionsv1alpha1.BackupEntry {
		t.Helper()
		be := &extensionsv1alpha1.BackupEntry{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, be); err != nil {
			return nil
		}
		return be
	}
	metrics := prometheus.NewRegistry()
	log := zaptest.NewLogger(t)
	js := &recordingJetStream{}
	p := &entry.Purger{Client: c, Providers: providers, JetStream: js, Cluster: "test",
		Scope: gardener.Scope{Types: []string{local.Type}, Classes: []string{"shoot"}}, Entries: entry.StatusWriter(c, log),
		Log: log, Now: time.Now, ProgressInterval: time.Hour, KeyRetries: 1, Copies: entry.NewCopyMetrics(metrics)}
	purge := func(be *extensionsv1alpha1.BackupEntry) error {
		t.Helper()
		data := events.PurgeData{Entry: be.Name, UID: string(be.UID), BucketName: bucketName, Prefix: gardener.EntryPrefix(be.Name), DueAt: time.Now()}
		e, err := events.NewPurgeEvent("test", events.OpPurgeDue, kube.Ref(events.KindBackupEntry, be), data, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p.Handle(ctx, e)
	}
	counted := func(destination, outcome string) float64 {
		t.Helper()
		families, err := metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if f.GetName() == "housekeeper_purge_copies_total" && labels["destination"] == destination && labels["outcome"] == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}

	t.Run("a forged purge of the live neighbour deletes nothing anywhere", func(t *testing.T) {
		if err := purge(live(neighbour)); err != nil {
			t.Fatal(err)
		}
		holds(t, "after a forged purge", true)
	})

	if err := c.Delete(ctx, live(target)); err != nil {
		t.Fatal(err)
	}
	t.Run("the destination refuses: the entry waits, neither store loses anything", func(t *testing.T) {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "second-copy"}, secret); err != nil {
			t.Fatal(err)
		}
		secret.Data[s3.KeySecretAccessKey] = []byte("not-the-secret-key")
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		err := purge(live(target))
		if err == nil {
			t.Fatal("purged with the destination's credentials refused")
		}
		if class := runner.ClassOf(err); class != runner.ClassUnavailable {
			t.Errorf("class %s, want %s (retried until the destination is back, never dead-lettered): %v", class, runner.ClassUnavailable, err)
		}
		be := live(target)
		if be == nil || !controllerutil.ContainsFinalizer(be, entry.Finalizer) {
			t.Fatalf("the entry was released: %+v", be)
		}
		le := be.Status.LastError
		if le == nil || !strings.Contains(le.Description, "BackupDestination second-copy") {
			t.Errorf("lastError %+v, want it to name BackupDestination second-copy", le)
		} else {
			for _, secret := range []string{"not-the-secret-key", stack.S3SecretKey, stack.S3AccessKey} {
				if strings.Contains(le.Description, secret) {
					t.Errorf("lastError holds a credential: %s", le.Description)
				}
			}
		}
		if n := counted("second-copy", entry.CopyFailed); n != 1 {
			t.Errorf("%s counted %v times, want once", entry.CopyFailed, n)
		}
		holds(t, "with the destination refusing", true)
	})

	t.Run("the destination unreachable: the entry waits, an outage's error", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		setEndpoint := func(endpoint string) {
			t.Helper()
			dest := &backupv1alpha1.BackupDestination{}
			if err := c.Get(ctx, client.ObjectKey{Name: "second-copy"}, dest); err != nil {
				t.Fatal(err)
			}
			dest.Spec.Endpoint = endpoint
			if err := c.Update(ctx, dest); err != nil {
				t.Fatal(err)
			}
		}
		setEndpoint(closed)
		defer setEndpoint(env.S3.Endpoint)
		err = purge(live(target))
		if class := runner.ClassOf(err); err == nil || class != runner.ClassUnavailable {
			t.Fatalf("purge with the destination unreachable: %v, class %s; want an error of class %s", err, class, runner.ClassUnavailable)
		}
		if be := live(target); be == nil || !controllerutil.ContainsFinalizer(be, entry.Finalizer) ||
			be.Status.LastError == nil || !strings.Contains(be.Status.LastError.Description, "BackupDestination second-copy") {
			t.Errorf("the entry %+v: want it kept, its lastError naming BackupDestination second-copy", be)
		}
		if n := counted("second-copy", entry.CopyFailed); n != 2 {
			t.Errorf("%s counted %v times, want twice", entry.CopyFailed, n)
		}
		holds(t, "with the destination unreachable", true)
	})

	t.Run("the destination back: both stores purged under the prefix only, the entry released", func(t *testing.T) {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "second-copy"}, secret); err != nil {
			t.Fatal(err)
		}
		secret.Data[s3.KeySecretAccessKey] = []byte(stack.S3SecretKey)
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if err := purge(live(target)); err != nil {
			t.Fatal(err)
		}
		if be := live(target); be != nil {
			t.Errorf("the entry is not released: finalizers %q, lastOperation %+v", be.Finalizers, be.Status.LastOperation)
		}
		holds(t, "after the purge", false)
		if n := counted("second-copy", entry.CopyPurged); n != 1 {
			t.Errorf("%s counted %v times, want once", entry.CopyPurged, n)
		}
		if n := counted("nowhere", entry.CopyLeft); n != 3 {
			t.Errorf("the destination that does not exist counted %v times %s, want 3 (once a purge)", n, entry.CopyLeft)
		}
		// The locked snapshot stays, marked for deletion; the rest of the prefix is gone.
		if got, want := keysOf(lockedCopy, "shoot--dev--gone"), slices.Sorted(slices.Values(append([]string{lockedKey}, neighbourKeys...))); !slices.Equal(got, want) {
			t.Errorf("the locked copy holds\n%q\nwant the locked snapshot and the neighbour's\n%q", got, want)
		}
		tags, err := raw.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String("locked-copy"), Key: aws.String(lockedKey)})
		if err != nil || !slices.ContainsFunc(tags.TagSet, func(tg s3types.Tag) bool { return aws.ToString(tg.Key) == s3.MarkTag }) {
			t.Errorf("%s in the locked copy is not marked for deletion: %v %v", lockedKey, tags, err)
		}
		if n := counted("locked-copy", entry.CopyLocked); n != 3 {
			t.Errorf("the locked copy counted %v times %s, want 3 (once a purge)", n, entry.CopyLocked)
		}
	})

	// The verify purges the entry's purge scheduled, as the NATS server would fire them.
	verifies := func(t *testing.T) []events.PurgeData {
		t.Helper()
		js.mu.Lock()
		defer js.mu.Unlock()
		var out []events.PurgeData
		for _, m := range js.msgs {
			e, err := events.Decode(m.Header, m.Data)
			if err != nil {
				t.Fatal(err)
			}
			var data events.PurgeData
			if e.Type() == events.TypePurgeVerify && e.DataAs(&data) == nil && data.Entry == target {
				out = append(out, data)
			}
		}
		return out
	}
	verify := func(t *testing.T, data events.PurgeData) {
		t.Helper()
		ref := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: target, UID: types.UID(data.UID)}}
		e, err := events.NewPurgeEvent("test", events.OpPurgeVerify, kube.Ref(events.KindBackupEntry, ref), data, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("when the copy's lock ends, the verify purge deletes what it kept, and only that", func(t *testing.T) {
		scheduled := verifies(t)
		if len(scheduled) != 1 || !slices.Equal(scheduled[0].LockedCopies, []string{"locked-copy"}) || scheduled[0].Locked != 1 ||
			time.Until(scheduled[0].LockedUntil) < 50*time.Minute {
			t.Fatalf("verify purges scheduled %+v, want one for the locked copy's snapshot, due in about an hour", scheduled)
		}
		// Fired early (a forged event, or a lock extended): what is locked stays, verified again later.
		verify(t, scheduled[0])
		if got := keysOf(lockedCopy, target+"/"); !slices.Equal(got, []string{lockedKey}) {
			t.Fatalf("after a verify purge before the lock's end the locked copy holds %q, want %q", got, lockedKey)
		}
		if again := verifies(t); len(again) != 2 || !slices.Equal(again[1].LockedCopies, []string{"locked-copy"}) {
			t.Fatalf("verify purges scheduled %+v, want the locked copy's again", again)
		}
		// The lock ends (governance mode: shortened by who may bypass it).
		if _, err := raw.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String("locked-copy"), Key: aws.String(lockedKey),
			BypassGovernanceRetention: aws.Bool(true), Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeGovernance,
				RetainUntilDate: aws.Time(time.Now().Add(time.Second))}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		verify(t, verifies(t)[1])
		if got := keysOf(lockedCopy, "shoot--dev--gone"); !slices.Equal(got, neighbourKeys) {
			t.Errorf("after the lock's end the locked copy holds\n%q\nwant only the neighbour's\n%q", got, neighbourKeys)
		}
		if n := len(verifies(t)); n != 2 {
			t.Errorf("%d verify purges scheduled, want no new one once nothing is locked", n)
		}
	})
}
