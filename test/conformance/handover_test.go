package conformance

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	localbackupbucket "github.com/gardener/gardener/pkg/provider-local/controller/backupbucket"
	localbackupentry "github.com/gardener/gardener/pkg/provider-local/controller/backupentry"
	"github.com/gardener/gardener/pkg/provider-local/controller/backupoptions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// containerMountPath is provider-local's --container-mount-path in the hand-over test (its
// default): the buckets as etcd's node sees them, written as hostPath into etcd-backup.
const containerMountPath = backupoptions.DefaultContainerMountPath

// TestHandOver runs infra/docs/deploy.md's hand-over and rollback under gardenlet, as an operator does
// them, on one seed: provider-local serves its backups, housekeeper (type local,
// --local-host-path as provider-local's --container-mount-path) takes over, then
// provider-local again. Objects, finalizers and backups survive both ways; etcd-backup keeps
// exactly what provider-local wrote and is never written otherwise (a watch sees every write);
// the rollback waits for the operation annotation reconcile on the extension objects; a purge
// housekeeper scheduled before the rollback leaves alone the namesake re-created after it.
//
// go test ./test/conformance -run TestHandOver
func TestHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a garden and a seed")
	}
	routeLibraryLogs()
	l := newLogs(t)
	binaries := startBuildingHousekeeper()

	g := startGarden(t, l)
	clk := startShiftClock(t)
	ctx := context.Background()
	r := &run{g: g, clk: clk, ext: providerLocal{}, log: l.logger(t, "test.log"), project: "ho", ns: "garden-ho", root: t.TempDir()}
	if err := g.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil {
		t.Fatal(err)
	}
	r.creds = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-credentials", Namespace: r.ns}, Data: map[string][]byte{"token": []byte("first")}}
	if err := g.client.Create(ctx, r.creds); err != nil {
		t.Fatal(err)
	}
	s := startSeed(t, g, l, clk, "ho-seed")
	r.src = s

	// 1. provider-local serves the seed's backups.
	stopProviderLocal := startProviderLocal(t, s, l, r.root, "1")
	bucket := r.deployBucket(t, s, string(s.seed.UID))
	if err := bucket.deployer.Wait(ctx); err != nil {
		t.Fatalf("BackupBucket %s: %v", bucket.name, err)
	}
	liveShoot := r.shoot(t, "live", gardencorev1beta1.ShootPurposeEvaluation, s)
	pendingShoot := r.shoot(t, "pending", gardencorev1beta1.ShootPurposeEvaluation, s)
	live := r.deployEntry(t, liveShoot, s, bucket.name)
	pending := r.deployEntry(t, pendingShoot, s, bucket.name)
	r.expectEntrySucceeded(t, live)
	r.expectEntrySucceeded(t, pending)
	liveBackups := writeBackups(t, r.root, bucket.name, live.name)
	pendingBackups := writeBackups(t, r.root, bucket.name, pending.name)
	r.expectEtcdBackup(t, s, liveShoot, "etcd-backup", bucket.name)
	want := map[string][]byte{"bucketName": []byte(bucket.name), "hostPath": []byte(containerMountPath)}
	before := etcdBackupData(t, s, liveShoot)
	if !maps.EqualFunc(before, want, bytesEqual) {
		t.Fatalf("provider-local's etcd-backup %q, want %q", before, want)
	}
	generatedRef := corev1.SecretReference{Namespace: "garden", Name: "generated-bucket-" + bucket.name}
	generated := secretData(t, s, generatedRef)
	t.Logf("provider-local wrote etcd-backup %q and the generated secret %q", before, generated)

	// Every write of an etcd-backup from here on: exactly what provider-local wrote.
	writes := watchEtcdBackups(t, s, want)

	// 2. Hand-over: provider-local's backup controllers stop (README step 2), housekeeper
	// starts (step 3). Nothing needs annotating: housekeeper reads every object when it starts.
	stopProviderLocal()
	bin := binaries(t)
	nats, err := stack.StartNATS(filepath.Join(l.dir, "jetstream"), stack.NATSLogger(l.zap(t, "nats-server.log")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Stop)
	hk := stack.Housekeeper{Bin: bin, Env: []string{
		"HOUSEKEEPER_NATS_URL=" + nats.URL,
		"HOUSEKEEPER_CLUSTER=" + s.name,
		"HOUSEKEEPER_TYPES=local",
		"HOUSEKEEPER_KUBECONFIG=" + s.kubeconfig,
		// as the chart sets local.etcdHostPath (--local-host-path)
		"HOUSEKEEPER_LOCAL_HOST_PATH=" + containerMountPath,
	}}
	handedOver := time.Now()
	stopHousekeeper := startHousekeeperProcesses(t, s, l, hk, r.root, all.NamesOf(all.Gardener)...)
	for _, e := range []*entryRef{live, pending} {
		r.eventually(t, "housekeeper reconciles "+e.name, reconciledSince(s, e.name, handedOver))
	}
	r.eventually(t, "housekeeper writes the live shoot's etcd-backup", func() error {
		secret := &corev1.Secret{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: technicalID(liveShoot), Name: "etcd-backup"}, secret); err != nil {
			return err
		}
		if secret.Labels[gardener.LabelManagedBy] != gardener.ManagedBy {
			return fmt.Errorf("labels %v", secret.Labels)
		}
		return nil
	})
	r.eventually(t, "housekeeper reconciles the bucket", func() error {
		secret := &corev1.Secret{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: generatedRef.Namespace, Name: generatedRef.Name}, secret); err != nil {
			return err
		}
		if secret.Labels[gardener.LabelManagedBy] != gardener.ManagedBy {
			return fmt.Errorf("labels %v", secret.Labels)
		}
		return nil
	})
	if got := etcdBackupData(t, s, liveShoot); !maps.EqualFunc(got, before, bytesEqual) {
		t.Errorf("etcd-backup after the hand-over %q, provider-local wrote %q", got, before)
	}
	if got := secretData(t, s, generatedRef); !maps.EqualFunc(got, generated, bytesEqual) {
		t.Errorf("generated secret after the hand-over %q, provider-local wrote %q", got, generated)
	}
	expectSurvived(t, r, s, bucket, live, pending)
	expectPresent(t, liveBackups)
	expectPresent(t, pendingBackups)

	// A purge housekeeper schedules and the rollback overtakes: the pending shoot is deleted
	// with a retention of 20 s.
	const retention = 20 * time.Second
	patchExtensionEntry(t, s, pending.name, func(be *extensionsv1alpha1.BackupEntry) {
		metav1.SetMetaDataAnnotation(&be.ObjectMeta, entry.AnnotationRetention, retention.String())
	})
	if err := pending.deployer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	var due time.Time
	r.eventually(t, "housekeeper schedules the purge of "+pending.name, func() error {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: pending.name}, be); err != nil {
			return err
		}
		op := be.Status.LastOperation
		if be.DeletionTimestamp == nil || op == nil || op.Type != gardencorev1beta1.LastOperationTypeDelete || op.State != gardencorev1beta1.LastOperationStatePending {
			return fmt.Errorf("deletionTimestamp %v, lastOperation %s", be.DeletionTimestamp, describeOp(op))
		}
		due = be.DeletionTimestamp.Add(retention)
		return nil
	})
	pendingUID := extensionEntryUID(t, s, pending.name)

	// 3. Rollback: housekeeper goes, provider-local's controllers come back (README rollback).
	stopHousekeeper()
	rolledBack := time.Now()
	startProviderLocal(t, s, l, r.root, "2")
	// provider-local finishes the deletion it finds (a deleting object passes its predicates):
	// the pending entry's backups go at once, before housekeeper's retention.
	r.waitCleanup(t, pending)
	expectGone(t, pendingBackups)
	if time.Now().After(due) {
		t.Logf("provider-local finished the deletion after housekeeper's purge came due (%s)", due.Format(time.RFC3339))
	}
	// Everything else provider-local leaves alone until the extension objects are annotated.
	time.Sleep(3 * time.Second)
	if err := reconciledSince(s, live.name, rolledBack)(); err == nil {
		t.Errorf("provider-local reconciled %s before the annotation: the README's rollback step 3 says it waits for it", live.name)
	} else {
		t.Logf("before the annotation provider-local has not reconciled %s: %v", live.name, err)
	}
	annotated := time.Now()
	annotateReconcile(t, s)
	r.eventually(t, "provider-local reconciles the bucket and the live entry once annotated", func() error {
		if err := reconciledSince(s, live.name, annotated)(); err != nil {
			return err
		}
		bb := &extensionsv1alpha1.BackupBucket{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: bucket.name}, bb); err != nil {
			return err
		}
		if _, ok := bb.Annotations[v1beta1constants.GardenerOperation]; ok {
			return fmt.Errorf("BackupBucket %s still annotated %v", bucket.name, bb.Annotations)
		}
		return nil
	})
	r.expectEntrySucceeded(t, live)
	if got := etcdBackupData(t, s, liveShoot); !maps.EqualFunc(got, before, bytesEqual) {
		t.Errorf("etcd-backup after the rollback %q, provider-local wrote %q", got, before)
	}
	expectSurvived(t, r, s, bucket, live)
	expectPresent(t, liveBackups)

	// The namesake: the pending shoot's entry deployed again, served by provider-local, with
	// backups of its own; then housekeeper's purge function (its schedule waited on the NATS
	// server) runs the purge that came due, and leaves it alone.
	again := r.deployEntry(t, pendingShoot, s, bucket.name)
	r.expectEntrySucceeded(t, again)
	if uid := extensionEntryUID(t, s, again.name); uid == pendingUID {
		t.Fatalf("the namesake has the deleted entry's uid %s", uid)
	}
	namesakeBackups := writeBackups(t, r.root, bucket.name, again.name)
	time.Sleep(time.Until(due))
	stopPurge := startHousekeeperProcesses(t, s, l, hk, r.root, "purge")
	r.eventually(t, "the purge that came due finds the namesake", func() error {
		b, err := os.ReadFile(filepath.Join(l.dir, s.name+"-purge.log"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "the entry was re-created since this purge was scheduled") {
			return fmt.Errorf("not yet in %s-purge.log", s.name)
		}
		return nil
	})
	stopPurge()
	expectPresent(t, namesakeBackups)
	expectSurvived(t, r, s, bucket, live, again)

	if bad := writes.stop(); len(bad) > 0 {
		t.Errorf("%d of %d writes of etcd-backup other than provider-local wrote it (%q):\n%s", len(bad), writes.seen(), want, strings.Join(bad, "\n"))
	} else {
		t.Logf("%d writes of etcd-backup watched, each exactly %q", writes.seen(), want)
	}
}

// startProviderLocal runs provider-local's backup controllers on s (as the control run does,
// with its default --container-mount-path) until the returned stop is called or the test ends.
func startProviderLocal(t *testing.T, s *seedEnv, l *logs, root, instance string) (stop func()) {
	t.Helper()
	mgr, err := manager.New(s.kube.Config, manager.Options{
		Scheme:                 kubernetes.SeedScheme,
		Logger:                 l.logger(t, s.name+"-provider-local-"+instance+".log"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := backupoptions.AddOptions{BackupBucketPath: root, ContainerMountPath: containerMountPath,
		ExtensionClasses: []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot}}
	if err := localbackupbucket.AddToManagerWithOptions(context.Background(), mgr, opts); err != nil {
		t.Fatal(err)
	}
	if err := localbackupentry.AddToManagerWithOptions(context.Background(), mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("provider-local %s: %v", instance, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// startHousekeeperProcesses runs housekeeper for s (setup, the bridge with the functions, or the
// functions named alone) with h's settings, ready, until the returned stop is called or the
// test ends.
func startHousekeeperProcesses(t *testing.T, s *seedEnv, l *logs, h stack.Housekeeper, root string, functions ...string) (stop func()) {
	t.Helper()
	var procs []stack.Proc
	if len(functions) > 1 {
		procs = append(procs, stack.Proc{Name: "bridge", Argv: h.Bridge("--leader-elect=false", "--resync-period", "1m")})
	}
	for _, fn := range functions {
		procs = append(procs, stack.Proc{Name: fn, Argv: h.Function(fn, "--local-root", root, "--backoff-base", "200ms", "--backoff-max", "2s")})
	}
	logs := func(name string) io.Writer { return l.file(t, s.name+"-"+name+".log") }
	started, err := h.StartAll(context.Background(), logs, []string{"--max-deliver", "200"}, procs...)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = stack.StopAll(started) }) }
	t.Cleanup(stop)
	return stop
}

// etcdBackupWatch records every version of every etcd-backup secret on a seed and what was
// wrong with it.
type etcdBackupWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	bad    []string
	n      int
}

// watchEtcdBackups watches the etcd-backup secrets of s until stop: each version must hold
// exactly want.
func watchEtcdBackups(t *testing.T, s *seedEnv, want map[string][]byte) *etcdBackupWatch {
	t.Helper()
	c, err := client.NewWithWatch(s.kube.Config, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &etcdBackupWatch{cancel: cancel, done: make(chan struct{})}
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.MatchingFields{"metadata.name": "etcd-backup"}); err != nil {
		t.Fatal(err)
	}
	rv := list.ResourceVersion
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, &corev1.SecretList{}, client.MatchingFields{"metadata.name": "etcd-backup"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				secret, ok := ev.Object.(*corev1.Secret)
				if !ok {
					continue
				}
				rv = secret.ResourceVersion
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				w.mu.Lock()
				w.n++
				if !maps.EqualFunc(secret.Data, want, bytesEqual) {
					w.bad = append(w.bad, fmt.Sprintf("%s %s/%s resourceVersion %s: %q", time.Now().Format("15:04:05.000"), secret.Namespace, secret.Name, secret.ResourceVersion, secret.Data))
				}
				w.mu.Unlock()
			}
			wi.Stop()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and returns the wrong versions it saw.
func (w *etcdBackupWatch) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bad
}

func (w *etcdBackupWatch) seen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// reconciledSince says whether the extension BackupEntry name was reconciled to Succeeded
// after since, and if not, why not.
func reconciledSince(s *seedEnv, name string, since time.Time) func() error {
	return func() error {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := s.client.Get(context.Background(), client.ObjectKey{Name: name}, be); err != nil {
			return err
		}
		op := be.Status.LastOperation
		if op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded || !op.LastUpdateTime.Time.After(since.Add(-time.Second)) {
			return fmt.Errorf("lastOperation %s", describeOp(op))
		}
		if _, ok := be.Annotations[v1beta1constants.GardenerOperation]; ok {
			return fmt.Errorf("still annotated %v", be.Annotations)
		}
		return nil
	}
}

// annotateReconcile annotates every extension BackupBucket and BackupEntry on s with
// gardener.cloud/operation=reconcile, as the README's rollback has the operator do:
// kubectl annotate backupbuckets,backupentries --all gardener.cloud/operation=reconcile --overwrite
func annotateReconcile(t *testing.T, s *seedEnv) {
	t.Helper()
	ctx := context.Background()
	var objs []client.Object
	buckets := &extensionsv1alpha1.BackupBucketList{}
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := s.client.List(ctx, buckets); err != nil {
		t.Fatal(err)
	}
	if err := s.client.List(ctx, entries); err != nil {
		t.Fatal(err)
	}
	for i := range buckets.Items {
		objs = append(objs, &buckets.Items[i])
	}
	for i := range entries.Items {
		objs = append(objs, &entries.Items[i])
	}
	for _, obj := range objs {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1beta1constants.GardenerOperation] = v1beta1constants.GardenerOperationReconcile
		obj.SetAnnotations(annotations)
		if err := s.client.Patch(ctx, obj, patch); err != nil {
			t.Fatalf("annotating %s: %v", obj.GetName(), err)
		}
	}
}

// expectSurvived checks that the bucket and the entries are there on s with their finalizers,
// and their secrets with theirs.
func expectSurvived(t *testing.T, r *run, s *seedEnv, bucket *bucketRef, entries ...*entryRef) {
	t.Helper()
	ctx := context.Background()
	bb := &extensionsv1alpha1.BackupBucket{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: bucket.name}, bb); err != nil {
		t.Fatalf("extension BackupBucket %s: %v", bucket.name, err)
	}
	expectFinalizer(t, s, bb, bb.Spec.SecretRef, "extensions.gardener.cloud/backupbucket")
	for _, e := range entries {
		be := &extensionsv1alpha1.BackupEntry{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: e.name}, be); err != nil {
			t.Fatalf("extension BackupEntry %s: %v", e.name, err)
		}
		expectFinalizer(t, s, be, be.Spec.SecretRef, entry.Finalizer)
		if _, err := e.deployer.Get(ctx); err != nil {
			t.Errorf("core BackupEntry %s: %v", e.name, err)
		}
	}
	if _, err := bucket.deployer.Get(ctx); err != nil {
		t.Errorf("core BackupBucket %s: %v", bucket.name, err)
	}
	_ = r
}

func expectFinalizer(t *testing.T, s *seedEnv, obj client.Object, ref corev1.SecretReference, finalizer string) {
	t.Helper()
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		t.Errorf("%s has finalizers %v, want %s", obj.GetName(), obj.GetFinalizers(), finalizer)
	}
	secret := &corev1.Secret{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		t.Errorf("secret %s/%s of %s: %v", ref.Namespace, ref.Name, obj.GetName(), err)
		return
	}
	if !slices.Contains(secret.Finalizers, finalizer) {
		t.Errorf("secret %s/%s of %s has finalizers %v, want %s", ref.Namespace, ref.Name, obj.GetName(), secret.Finalizers, finalizer)
	}
}

func patchExtensionEntry(t *testing.T, s *seedEnv, name string, mutate func(*extensionsv1alpha1.BackupEntry)) {
	t.Helper()
	be := &extensionsv1alpha1.BackupEntry{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: name}, be); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(be.DeepCopy())
	mutate(be)
	if err := s.client.Patch(context.Background(), be, patch); err != nil {
		t.Fatal(err)
	}
}

func extensionEntryUID(t *testing.T, s *seedEnv, name string) string {
	t.Helper()
	be := &extensionsv1alpha1.BackupEntry{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Name: name}, be); err != nil {
		t.Fatal(err)
	}
	return string(be.UID)
}

func etcdBackupData(t *testing.T, s *seedEnv, shoot *gardencorev1beta1.Shoot) map[string][]byte {
	t.Helper()
	return secretData(t, s, corev1.SecretReference{Namespace: technicalID(shoot), Name: "etcd-backup"})
}

func secretData(t *testing.T, s *seedEnv, ref corev1.SecretReference) map[string][]byte {
	t.Helper()
	secret := &corev1.Secret{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			t.Fatalf("secret %s/%s: %v", ref.Namespace, ref.Name, err)
		}
		t.Fatal(err)
	}
	if secret.Data == nil {
		return map[string][]byte{}
	}
	return secret.Data
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
