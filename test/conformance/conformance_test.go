package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corebackupbucket "github.com/gardener/gardener/pkg/component/garden/backupbucket"
	corebackupentry "github.com/gardener/gardener/pkg/component/garden/backupentry"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

const (
	waitInterval = 250 * time.Millisecond
	waitTimeout  = 90 * time.Second
)

// TestConformance runs every scenario against housekeeper and against the control,
// provider-local, each on its own seeds under the same garden.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite starts a garden and four seeds")
	}
	routeLibraryLogs()
	gl := newLogs(t)

	// Build housekeeper while the garden starts.
	bin := startBuildingHousekeeper()

	g := startGarden(t, gl)
	clk := startShiftClock(t)
	t.Run("registration", func(t *testing.T) { testRegistration(t, g, gl) })

	for _, ext := range []extension{providerLocal{}, housekeeper{bin: bin, azure: &azureSide{}, s3: &s3Side{}}} {
		t.Run(ext.name(), func(t *testing.T) {
			runScenarios(t, g, clk, ext)
		})
	}
}

// run is one implementation's world: a project in the garden, a source and a destination seed
// sharing one directory of bucket directories, and a bucket per seed.
type run struct {
	g       *garden
	clk     *shiftClock
	ext     extension
	log     logr.Logger
	project string // project name; its namespace is garden-<project>
	ns      string
	root    string
	src     *seedEnv
	dst     *seedEnv
	creds   *corev1.Secret

	// bucketA and bucketB are the source and the destination seed's buckets.
	bucketA, bucketB *bucketRef
	buckets          []*bucketRef
	entries          []*entryRef
}

type bucketRef struct {
	name     string
	seed     *seedEnv
	deployer corebackupbucket.Interface
}

type entryRef struct {
	name  string
	shoot *gardencorev1beta1.Shoot
	// seed is the seed whose shoot namespace holds the entry's etcd-backup.
	seed     *seedEnv
	deployer corebackupentry.Interface
}

func runScenarios(t *testing.T, g *garden, clk *shiftClock, ext extension) {
	ctx := context.Background()
	l := newLogs(t)
	short := map[string]string{"provider-local": "pl", "housekeeper": "hk"}[ext.name()]
	r := &run{g: g, clk: clk, ext: ext, log: l.logger(t, "test.log"), project: short, ns: "garden-" + short, root: t.TempDir()}
	if err := g.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil {
		t.Fatal(err)
	}
	r.creds = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-credentials", Namespace: r.ns},
		Data:       map[string][]byte{"token": []byte("first")},
	}
	if err := g.client.Create(ctx, r.creds); err != nil {
		t.Fatal(err)
	}
	r.src = startSeed(t, g, l, clk, short+"-source")
	r.dst = startSeed(t, g, l, clk, short+"-destination")
	ext.start(t, r.src, l, r.root)
	ext.start(t, r.dst, l, r.root)

	// Each seed's bucket is named after the seed's uid, as gardenlet's seed controller does.
	bucketA := r.deployBucket(t, r.src, string(r.src.seed.UID))
	bucketB := r.deployBucket(t, r.dst, string(r.dst.seed.UID))
	for _, b := range []*bucketRef{bucketA, bucketB} {
		if err := b.deployer.Wait(ctx); err != nil {
			t.Fatalf("BackupBucket %s: %v", b.name, err)
		}
	}

	r.bucketA, r.bucketB = bucketA, bucketB
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(r, t) })
	}
}

// scenarios run in this order on the world runScenarios starts. Each builds its own shoots
// and entries, so any one runs alone, e.g.
// go test ./test/conformance -run 'TestConformance/housekeeper/4-'; bucket deletion comes last
// because it deletes the buckets the others use.
var scenarios = []struct {
	name string
	run  func(*run, *testing.T)
}{
	{"1-reconcile", (*run).reconcile},
	{"2-error-and-recovery", (*run).errorAndRecovery},
	{"3-delete-without-grace-period", (*run).deleteWithoutGracePeriod},
	{"4-delete-with-grace-period", (*run).deleteWithGracePeriod},
	{"6-credentials-rotation", (*run).credentialsRotation},
	{"5-control-plane-migration", (*run).controlPlaneMigration},
	{"11-garden-class-entry", (*run).gardenClassEntry},
	{"7-bucket-delete", (*run).bucketDelete},
	{"8-azure-service-principal", (*run).azureServicePrincipal},
	{"9-locked-source-entry", (*run).lockedSourceEntry},
	{"10-workload-identity-entry", (*run).workloadIdentityEntry},
}

// 1-reconcile: an entry is reconciled: etcd-backup written, the extension objects as gardenlet deployed them, the bucket directory there.
func (r *run) reconcile(t *testing.T) {
	ctx := context.Background()
	bucketA := r.bucketA
	shoot := r.shoot(t, "one", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	e1 := r.deployEntry(t, shoot, r.src, bucketA.name)
	r.expectEntrySucceeded(t, e1)
	r.expectEtcdBackup(t, e1.seed, shoot, "etcd-backup", bucketA.name)

	be := &extensionsv1alpha1.BackupEntry{}
	if err := r.src.client.Get(ctx, client.ObjectKey{Name: e1.name}, be); err != nil {
		t.Fatal(err)
	}
	if be.Status.LastOperation == nil || be.Status.LastOperation.State != gardencorev1beta1.LastOperationStateSucceeded {
		t.Errorf("extension BackupEntry lastOperation = %+v, want Succeeded", be.Status.LastOperation)
	}
	t.Logf("extension BackupEntry as gardenlet deployed it: annotations %v, labels %v, finalizers %v, spec.secretRef %s/%s",
		be.Annotations, be.Labels, be.Finalizers, be.Spec.SecretRef.Namespace, be.Spec.SecretRef.Name)
	bb := &extensionsv1alpha1.BackupBucket{}
	if err := r.src.client.Get(ctx, client.ObjectKey{Name: bucketA.name}, bb); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(r.root, bucketA.name)); err != nil || !info.IsDir() {
		t.Errorf("bucket directory %s: %v", bucketA.name, err)
	}
	t.Logf("extension BackupBucket as gardenlet deployed it: annotations %v, labels %v, spec.secretRef %s/%s, status.generatedSecretRef %v",
		bb.Annotations, bb.Labels, bb.Spec.SecretRef.Namespace, bb.Spec.SecretRef.Name, bb.Status.GeneratedSecretRef)
}

// 2-error-and-recovery: errors are reported and recovered from: a bucket that cannot be created, an entry whose shoot namespace comes late.
func (r *run) errorAndRecovery(t *testing.T) {
	ctx := context.Background()
	bucketA := r.bucketA
	t.Run("bucket-directory-cannot-be-created", func(t *testing.T) {
		// A dangling symbolic link where the bucket directory belongs: the provider cannot
		// create the bucket, a real failure of the local object store.
		name := "broken-" + r.project
		link := filepath.Join(r.root, name)
		if err := os.Symlink(filepath.Join(r.root, "nowhere", "at-all"), link); err != nil {
			t.Fatal(err)
		}
		b := r.deployBucket(t, r.src, name)
		r.eventually(t, "core BackupBucket "+name+" reports the error", func() error {
			bb, err := b.deployer.Get(ctx)
			if err != nil {
				return err
			}
			if bb.Status.LastError == nil || bb.Status.LastOperation == nil || bb.Status.LastOperation.State != gardencorev1beta1.LastOperationStateError {
				return fmt.Errorf("lastOperation %s, lastError %s", describeOp(bb.Status.LastOperation), describeErr(bb.Status.LastError))
			}
			t.Logf("core BackupBucket while the directory cannot be created: lastError %q", bb.Status.LastError.Description)
			return nil
		})
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		// gardenlet's seed controller re-deploys its bucket regularly; do it now.
		r.redeployBucket(t, b)
		if err := b.deployer.Wait(ctx); err != nil {
			t.Fatalf("core BackupBucket after the fix: %v", err)
		}
		if info, err := os.Stat(filepath.Join(r.root, name)); err != nil || !info.IsDir() {
			t.Errorf("bucket directory %s after recovery: %v", name, err)
		}
	})
	t.Run("late-shoot-namespace", func(t *testing.T) {
		if !r.ext.watchesNamespaces() {
			t.Skip("provider-local, deployed as gardenlet expects (reconciling on the operation annotation), " +
				"watches no namespaces: it reports success and never writes etcd-backup once the namespace appears (gardener#9749); " +
				"upstream gardenlet deploys the namespace before the BackupEntry")
		}
		shoot := r.shootWithoutNamespace(t, "late", gardencorev1beta1.ShootPurposeEvaluation, r.src)
		e := r.deployEntry(t, shoot, r.src, bucketA.name)
		r.expectEntrySucceeded(t, e)
		r.neverState(t, e, gardencorev1beta1.LastOperationStateError, 4*time.Second)
		if err := r.src.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: technicalID(shoot)}}); err != nil {
			t.Fatal(err)
		}
		r.expectEtcdBackup(t, r.src, shoot, "etcd-backup", bucketA.name)
		r.neverState(t, e, gardencorev1beta1.LastOperationStateError, time.Second)
	})
}

// 3-delete-without-grace-period: deleting an entry without a grace period purges its backups at once and no neighbour's.
func (r *run) deleteWithoutGracePeriod(t *testing.T) {
	ctx := context.Background()
	bucketA := r.bucketA
	shoot := r.shoot(t, "three", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	neighbourShoot := r.shoot(t, "threen", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	e := r.deployEntry(t, shoot, r.src, bucketA.name)
	n := r.deployEntry(t, neighbourShoot, r.src, bucketA.name)
	r.expectEntrySucceeded(t, e)
	r.expectEntrySucceeded(t, n)
	r.expectEtcdBackup(t, r.src, shoot, "etcd-backup", bucketA.name)
	backups := writeBackups(t, r.root, bucketA.name, e.name)
	neighbour := writeBackups(t, r.root, bucketA.name, n.name)

	r.destroyEntry(t, e)
	expectGone(t, backups)
	expectPresent(t, neighbour)
	if _, err := e.deployer.Get(ctx); !apierrors.IsNotFound(err) {
		t.Errorf("core BackupEntry %s after deletion: %v, want NotFound", e.name, err)
	}
	r.expectNoSecret(t, r.src, technicalID(shoot), "etcd-backup")
}

// 4-delete-with-grace-period: deleting an entry with a grace period keeps its backups until the period ends.
func (r *run) deleteWithGracePeriod(t *testing.T) {
	ctx := context.Background()
	bucketA := r.bucketA
	shoot := r.shoot(t, "four", gardencorev1beta1.ShootPurposeProduction, r.src)
	e := r.deployEntry(t, shoot, r.src, bucketA.name)
	r.expectEntrySucceeded(t, e)
	backups := writeBackups(t, r.root, bucketA.name, e.name)

	if err := e.deployer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "gardenlet schedules the deletion", func() error {
		be, err := e.deployer.Get(ctx)
		if err != nil {
			return err
		}
		if op := be.Status.LastOperation; op == nil || op.State != gardencorev1beta1.LastOperationStatePending {
			return fmt.Errorf("lastOperation %s", describeOp(op))
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	expectPresent(t, backups)
	be := &extensionsv1alpha1.BackupEntry{}
	if err := r.src.client.Get(ctx, client.ObjectKey{Name: e.name}, be); err != nil {
		t.Fatalf("extension BackupEntry during the grace period: %v", err)
	}
	if be.DeletionTimestamp != nil {
		t.Errorf("extension BackupEntry is being deleted during the grace period")
	}

	r.clk.Shift(deletionGracePeriodHours*time.Hour + time.Minute)
	defer r.clk.Shift(0)
	// as upstream's integration test: the reconcile annotation makes gardenlet look again.
	core, err := e.deployer.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(core.DeepCopy())
	metav1.SetMetaDataAnnotation(&core.ObjectMeta, v1beta1constants.GardenerOperation, v1beta1constants.GardenerOperationReconcile)
	if err := r.g.client.Patch(ctx, core, patch); err != nil {
		t.Fatal(err)
	}
	r.waitCleanup(t, e)
	r.clk.Shift(0)
	expectGone(t, backups)
}

// 6-credentials-rotation: rotated credentials reach the bucket's and the entry's secrets.
func (r *run) credentialsRotation(t *testing.T) {
	ctx := context.Background()
	bucketA := r.bucketA
	shoot := r.shoot(t, "six", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	e1 := r.deployEntry(t, shoot, r.src, bucketA.name)
	r.expectEntrySucceeded(t, e1)
	rotatedAt := time.Now().Add(-time.Second)
	creds := &corev1.Secret{}
	if err := r.g.client.Get(ctx, client.ObjectKeyFromObject(r.creds), creds); err != nil {
		t.Fatal(err)
	}
	creds.Data = map[string][]byte{"token": []byte("second")}
	if err := r.g.client.Update(ctx, creds); err != nil {
		t.Fatal(err)
	}
	// gardenlet's seed controller re-deploys the seed's bucket (reconcile annotation).
	r.redeployBucket(t, bucketA)
	r.eventually(t, "gardenlet copies the rotated credentials to the seed", func() error {
		s := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Namespace: "garden", Name: "bucket-" + bucketA.name}, s); err != nil {
			return err
		}
		if string(s.Data["token"]) != "second" {
			return fmt.Errorf("bucket-%s holds token %q", bucketA.name, s.Data["token"])
		}
		return nil
	})
	r.eventually(t, "the extension reconciles the bucket with the rotated secret", func() error {
		bb := &extensionsv1alpha1.BackupBucket{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Name: bucketA.name}, bb); err != nil {
			return err
		}
		op := bb.Status.LastOperation
		if op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded || op.LastUpdateTime.Time.Before(rotatedAt) {
			return fmt.Errorf("extension BackupBucket lastOperation %s", describeOp(op))
		}
		return nil
	})
	if err := bucketA.deployer.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// When the extension reports status.generatedSecretRef, gardenlet gives BackupEntries the
	// data of the garden copy of that secret (the secret the core BackupBucket references in
	// status.generatedSecretRef), not spec.credentialsRef. Rotate that one and re-deploy the
	// entry as the shoot's reconcile does: its etcd-backup must carry the new data.
	bb, err := bucketA.deployer.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bb.Status.GeneratedSecretRef == nil {
		t.Fatalf("core BackupBucket %s has no status.generatedSecretRef", bucketA.name)
	}
	generated := &corev1.Secret{}
	if err := r.g.client.Get(ctx, client.ObjectKey{Namespace: bb.Status.GeneratedSecretRef.Namespace, Name: bb.Status.GeneratedSecretRef.Name}, generated); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(generated.DeepCopy())
	if generated.Data == nil {
		generated.Data = map[string][]byte{}
	}
	generated.Data["rotated"] = []byte(rotatedAt.Format(time.RFC3339Nano))
	if err := r.g.client.Patch(ctx, generated, patch); err != nil {
		t.Fatal(err)
	}
	if err := e1.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.eventually(t, "etcd-backup carries the rotated data", func() error {
		s := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Namespace: technicalID(e1.shoot), Name: "etcd-backup"}, s); err != nil {
			return err
		}
		if string(s.Data["rotated"]) != rotatedAt.Format(time.RFC3339Nano) {
			return fmt.Errorf("etcd-backup keys %v, rotated=%q", keys(s.Data), s.Data["rotated"])
		}
		if string(s.Data["bucketName"]) != bucketA.name {
			return fmt.Errorf("etcd-backup bucketName %q", s.Data["bucketName"])
		}
		return nil
	})
	r.expectEntrySucceeded(t, e1)
}

// 5-control-plane-migration: an entry migrates to another seed: released without cleanup on the source, restored on the destination.
func (r *run) controlPlaneMigration(t *testing.T) {
	ctx := context.Background()
	bucketA, bucketB := r.bucketA, r.bucketB
	shoot := r.shoot(t, "five", gardencorev1beta1.ShootPurposeEvaluation, r.src, r.dst)
	e := r.deployEntry(t, shoot, r.src, bucketA.name)
	r.expectEntrySucceeded(t, e)
	backups := writeBackups(t, r.root, bucketA.name, e.name)

	// Migrate: the core BackupEntry is scheduled to the destination seed; the source
	// gardenlet annotates the extension object with migrate, waits for Migrate Succeeded,
	// then deletes it. Its delete is held until the extension has settled and more events
	// have passed.
	r.src.holdExtensionDeletes.Store(true)
	defer r.src.holdExtensionDeletes.Store(false)
	migrate := r.entryDeployer(e.shoot, e.name, r.dst.name, bucketA.name)
	if err := migrate.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ext := &extensionsv1alpha1.BackupEntry{}
	r.eventually(t, "the extension migrates the source seed's BackupEntry", func() error {
		if err := r.src.client.Get(ctx, client.ObjectKey{Name: e.name}, ext); err != nil {
			return err
		}
		op := ext.Status.LastOperation
		if op == nil || op.Type != gardencorev1beta1.LastOperationTypeMigrate || op.State != gardencorev1beta1.LastOperationStateSucceeded {
			return fmt.Errorf("lastOperation %s", describeOp(op))
		}
		if v, ok := ext.Annotations[v1beta1constants.GardenerOperation]; ok {
			return fmt.Errorf("annotation %s=%s still present", v1beta1constants.GardenerOperation, v)
		}
		return nil
	})
	t.Logf("source extension BackupEntry after Migrate: annotations %v, finalizers %v", ext.Annotations, ext.Finalizers)
	for i := range 3 {
		patch := client.MergeFrom(ext.DeepCopy())
		metav1.SetMetaDataAnnotation(&ext.ObjectMeta, v1beta1constants.GardenerTimestamp, time.Now().UTC().Format(time.RFC3339Nano))
		metav1.SetMetaDataLabel(&ext.ObjectMeta, "conformance.housekeeper.dev/touch", fmt.Sprint(i))
		if err := r.src.client.Patch(ctx, ext, patch); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
	}
	expectPresent(t, backups)
	r.src.holdExtensionDeletes.Store(false)
	r.eventually(t, "gardenlet finishes the migration", func() error {
		be, err := migrate.Get(ctx)
		if err != nil {
			return err
		}
		op := be.Status.LastOperation
		if op == nil || op.Type != gardencorev1beta1.LastOperationTypeMigrate || op.State != gardencorev1beta1.LastOperationStateSucceeded || be.Status.SeedName != nil {
			return fmt.Errorf("lastOperation %s, status.seedName %v", describeOp(op), ptr.Deref(be.Status.SeedName, "<nil>"))
		}
		err = r.src.client.Get(ctx, client.ObjectKey{Name: e.name}, &extensionsv1alpha1.BackupEntry{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("extension BackupEntry on the source seed: %v, want NotFound", err)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	expectPresent(t, backups)

	// Restore on the destination, as gardenlet's shoot flow does: the source- entry on the
	// source bucket first, then the entry itself switched to the destination seed's bucket.
	sourceName := v1beta1constants.BackupSourcePrefix + "-" + e.name
	source := &entryRef{name: sourceName, shoot: shoot, seed: r.dst, deployer: r.entryDeployer(shoot, sourceName, r.dst.name, bucketA.name)}
	r.entries = append(r.entries, source)
	if err := source.deployer.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	r.expectEntrySucceeded(t, source)
	r.expectEtcdBackup(t, r.dst, shoot, "source-etcd-backup", bucketA.name)

	restore := r.entryDeployer(shoot, e.name, r.dst.name, bucketB.name)
	e.deployer, e.seed = restore, r.dst
	state := &gardencorev1beta1.ShootState{}
	if err := r.g.client.Get(ctx, client.ObjectKeyFromObject(shoot), state); err != nil {
		t.Fatal(err)
	}
	if err := restore.Restore(ctx, state); err != nil {
		t.Fatal(err)
	}
	r.expectEntrySucceeded(t, e)
	r.eventually(t, "gardenlet removes the restore annotation", func() error {
		be, err := restore.Get(ctx)
		if err != nil {
			return err
		}
		if v, ok := be.Annotations[v1beta1constants.GardenerOperation]; ok {
			return fmt.Errorf("annotation %s=%s", v1beta1constants.GardenerOperation, v)
		}
		if be.Spec.BucketName != bucketB.name {
			return fmt.Errorf("spec.bucketName %s", be.Spec.BucketName)
		}
		return nil
	})
	r.expectEtcdBackup(t, r.dst, shoot, "etcd-backup", bucketB.name)
	expectPresent(t, backups)

	// etcd's copy task copies the backups to the destination bucket.
	copied := copyBackups(t, r.root, bucketA.name, bucketB.name, e.name)

	// gardenlet destroys the source- entry with force-deletion.
	if err := source.deployer.SetForceDeletionAnnotation(ctx); err != nil {
		t.Fatal(err)
	}
	if err := source.deployer.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitCleanup(t, source)
	expectGone(t, backups)
	expectPresent(t, copied)
	r.expectEtcdBackup(t, r.dst, shoot, "etcd-backup", bucketB.name)
	r.expectNoSecret(t, r.dst, technicalID(shoot), "source-etcd-backup")
}

// 7-bucket-delete: deleting the remaining entries and the buckets removes the directories and the secrets.
func (r *run) bucketDelete(t *testing.T) {
	ctx := context.Background()
	for _, e := range r.entries {
		if _, err := e.deployer.Get(ctx); apierrors.IsNotFound(err) {
			continue
		}
		if err := e.deployer.SetForceDeletionAnnotation(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.deployer.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range r.entries {
		r.waitCleanup(t, e)
	}
	for _, b := range r.buckets {
		if err := b.deployer.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range r.buckets {
		wctx, cancel := context.WithTimeout(ctx, waitTimeout)
		err := b.deployer.WaitCleanup(wctx)
		cancel()
		if err != nil {
			bb, _ := b.deployer.Get(ctx)
			t.Fatalf("core BackupBucket %s not deleted: %v (lastOperation %s, lastError %s)", b.name, err, describeOp(bb.Status.LastOperation), describeErr(bb.Status.LastError))
		}
		if _, err := os.Lstat(filepath.Join(r.root, b.name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("bucket directory %s after deletion: %v, want it gone", b.name, err)
		}
		r.expectNoSecret(t, b.seed, "garden", "generated-bucket-"+b.name)
		r.expectNoSecret(t, b.seed, "garden", "bucket-"+b.name)
		if err := b.seed.client.Get(ctx, client.ObjectKey{Name: b.name}, &extensionsv1alpha1.BackupBucket{}); !apierrors.IsNotFound(err) {
			t.Errorf("extension BackupBucket %s: %v, want NotFound", b.name, err)
		}
	}
}

// deployBucket deploys a core BackupBucket of type local for the seed with gardener's deployer.
func (r *run) deployBucket(t *testing.T, s *seedEnv, name string) *bucketRef {
	t.Helper()
	d := r.bucketDeployer(s, name)
	if err := d.Deploy(context.Background()); err != nil {
		t.Fatalf("deploying BackupBucket %s: %v", name, err)
	}
	b := &bucketRef{name: name, seed: s, deployer: d}
	r.buckets = append(r.buckets, b)
	return b
}

func (r *run) bucketDeployer(s *seedEnv, name string) corebackupbucket.Interface {
	return corebackupbucket.New(r.log, r.g.client, &corebackupbucket.Values{
		Name: name,
		Config: &gardencorev1beta1.Backup{
			Provider:       "local",
			CredentialsRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: r.creds.Namespace, Name: r.creds.Name},
		},
		DefaultRegion: "local",
		Seed:          s.seed,
		Clock:         r.clk,
	}, waitInterval, waitTimeout)
}

// deployProviderBucket deploys, for the source seed, a core BackupBucket of providerType in
// region with providerConfig config (its JSON keys sorted, as the API server returns them:
// gardenlet compares the extension spec it wants with the one it reads) and the credentials
// creds, and waits until it is ready.
func (r *run) deployProviderBucket(t *testing.T, name, providerType, region string, creds *corev1.Secret, config string) corebackupbucket.Interface {
	t.Helper()
	ctx := context.Background()
	d := corebackupbucket.New(r.log, r.g.client, &corebackupbucket.Values{
		Name: name,
		Config: &gardencorev1beta1.Backup{
			Provider:       providerType,
			ProviderConfig: &runtime.RawExtension{Raw: []byte(config)},
			CredentialsRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: creds.Namespace, Name: creds.Name},
		},
		DefaultRegion: region,
		Seed:          r.src.seed,
		Clock:         r.clk,
	}, waitInterval, waitTimeout)
	if err := d.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx); err != nil {
		bb, _ := d.Get(ctx)
		t.Fatalf("core BackupBucket %s: %v (lastOperation %s, lastError %s)", name, err, describeOp(bb.Status.LastOperation), describeErr(bb.Status.LastError))
	}
	return d
}

// destroyProviderBucket deletes a bucket deployProviderBucket made and waits until it is gone.
func (r *run) destroyProviderBucket(t *testing.T, d corebackupbucket.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	if err := d.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitCleanup(ctx); err != nil {
		bb, _ := d.Get(ctx)
		t.Fatalf("core BackupBucket %s not deleted: %v (lastOperation %s, lastError %s)", name, err, describeOp(bb.Status.LastOperation), describeErr(bb.Status.LastError))
	}
}

// redeployBucket deploys the bucket again with a new deployer, as gardenlet's seed controller
// does on each of its reconciles.
func (r *run) redeployBucket(t *testing.T, b *bucketRef) {
	t.Helper()
	b.deployer = r.bucketDeployer(b.seed, b.name)
	if err := b.deployer.Deploy(context.Background()); err != nil {
		t.Fatalf("deploying BackupBucket %s again: %v", b.name, err)
	}
}

// shoot creates a Shoot in the project, its ShootState, and on each seed its Cluster resource
// and its control-plane namespace.
func (r *run) shoot(t *testing.T, name string, purpose gardencorev1beta1.ShootPurpose, seeds ...*seedEnv) *gardencorev1beta1.Shoot {
	t.Helper()
	shoot := r.shootWithoutNamespace(t, name, purpose, seeds...)
	for _, s := range seeds {
		if err := s.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: technicalID(shoot)}}); err != nil {
			t.Fatal(err)
		}
	}
	return shoot
}

func (r *run) shootWithoutNamespace(t *testing.T, name string, purpose gardencorev1beta1.ShootPurpose, seeds ...*seedEnv) *gardencorev1beta1.Shoot {
	t.Helper()
	ctx := context.Background()
	shoot := &gardencorev1beta1.Shoot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Spec: gardencorev1beta1.ShootSpec{
			Purpose:                ptr.To(purpose),
			CredentialsBindingName: ptr.To("local"),
			CloudProfile:           &gardencorev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
			Region:                 "local",
			SeedName:               ptr.To(seeds[0].name),
			Provider: gardencorev1beta1.Provider{
				Type: "local",
				Workers: []gardencorev1beta1.Worker{{
					Name: "worker", Minimum: 1, Maximum: 1,
					Machine: gardencorev1beta1.Machine{Type: "local", Image: &gardencorev1beta1.ShootMachineImage{Name: "local", Version: ptr.To("1.0.0")}},
				}},
			},
			Kubernetes: gardencorev1beta1.Kubernetes{Version: "1.31.1"},
			Networking: &gardencorev1beta1.Networking{Type: ptr.To("local")},
		},
	}
	if err := r.g.client.Create(ctx, shoot); err != nil {
		t.Fatalf("creating Shoot %s: %v", name, err)
	}
	state := &gardencorev1beta1.ShootState{ObjectMeta: metav1.ObjectMeta{Name: shoot.Name, Namespace: shoot.Namespace}}
	if err := r.g.client.Create(ctx, state); err != nil {
		t.Fatalf("creating ShootState %s: %v", name, err)
	}
	for _, s := range seeds {
		cluster := &extensionsv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: technicalID(shoot)},
			Spec: extensionsv1alpha1.ClusterSpec{
				Shoot:        runtime.RawExtension{Object: shoot},
				Seed:         &runtime.RawExtension{Object: s.seed},
				CloudProfile: runtime.RawExtension{Object: &gardencorev1beta1.CloudProfile{}},
			},
		}
		if err := s.client.Create(ctx, cluster); err != nil {
			t.Fatalf("creating Cluster %s on %s: %v", cluster.Name, s.name, err)
		}
	}
	return shoot
}

func technicalID(shoot *gardencorev1beta1.Shoot) string {
	return "shoot--" + strings.TrimPrefix(shoot.Namespace, "garden-") + "--" + shoot.Name
}

// entryDeployer is gardener's deployer for a shoot's core BackupEntry, as the botanist builds it.
func (r *run) entryDeployer(shoot *gardencorev1beta1.Shoot, name, seedName, bucketName string) corebackupentry.Interface {
	ownerRef := metav1.NewControllerRef(shoot, gardencorev1beta1.SchemeGroupVersion.WithKind("Shoot"))
	ownerRef.BlockOwnerDeletion = ptr.To(false)
	return corebackupentry.New(r.log, r.g.client, &corebackupentry.Values{
		Namespace:      shoot.Namespace,
		Name:           name,
		ShootPurpose:   shoot.Spec.Purpose,
		OwnerReference: ownerRef,
		SeedName:       ptr.To(seedName),
		BucketName:     bucketName,
	}, waitInterval, waitTimeout)
}

// deployEntry deploys the shoot's BackupEntry (named <technical id>--<shoot uid>) on the seed.
func (r *run) deployEntry(t *testing.T, shoot *gardencorev1beta1.Shoot, s *seedEnv, bucketName string) *entryRef {
	t.Helper()
	name := technicalID(shoot) + "--" + string(shoot.UID)
	e := &entryRef{name: name, shoot: shoot, seed: s, deployer: r.entryDeployer(shoot, name, s.name, bucketName)}
	if err := e.deployer.Deploy(context.Background()); err != nil {
		t.Fatalf("deploying BackupEntry %s: %v", name, err)
	}
	r.entries = append(r.entries, e)
	return e
}

// expectEntrySucceeded waits with the deployer's Wait, then checks the core status itself.
func (r *run) expectEntrySucceeded(t *testing.T, e *entryRef) {
	t.Helper()
	ctx := context.Background()
	if err := e.deployer.Wait(ctx); err != nil {
		be, _ := e.deployer.Get(ctx)
		t.Fatalf("core BackupEntry %s not ready: %v (lastOperation %s, lastError %s)", e.name, err, describeOp(be.Status.LastOperation), describeErr(be.Status.LastError))
	}
	// gardenlet writes Processing at the start of every reconcile it makes after an event, so
	// read the status until it settles on Succeeded.
	r.eventually(t, "core BackupEntry "+e.name+" Succeeded", func() error {
		be, err := e.deployer.Get(ctx)
		if err != nil {
			return err
		}
		if op := be.Status.LastOperation; op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded || be.Status.LastError != nil {
			return fmt.Errorf("lastOperation %s, lastError %s", describeOp(op), describeErr(be.Status.LastError))
		}
		return nil
	})
}

// neverState fails if the core BackupEntry shows state within d.
func (r *run) neverState(t *testing.T, e *entryRef, state gardencorev1beta1.LastOperationState, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		be, err := e.deployer.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if op := be.Status.LastOperation; op != nil && op.State == state {
			t.Fatalf("core BackupEntry %s went to %s: %s (lastError %s)", e.name, state, op.Description, describeErr(be.Status.LastError))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// expectEtcdBackup waits for the secret etcd-backup-restore reads in the shoot's namespace.
func (r *run) expectEtcdBackup(t *testing.T, s *seedEnv, shoot *gardencorev1beta1.Shoot, name, bucketName string) {
	t.Helper()
	r.eventually(t, fmt.Sprintf("secret %s/%s on %s names bucket %s", technicalID(shoot), name, s.name, bucketName), func() error {
		secret := &corev1.Secret{}
		if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: technicalID(shoot), Name: name}, secret); err != nil {
			return err
		}
		if got := string(secret.Data["bucketName"]); got != bucketName {
			return fmt.Errorf("bucketName %q", got)
		}
		return nil
	})
}

func (r *run) expectNoSecret(t *testing.T, s *seedEnv, namespace, name string) {
	t.Helper()
	r.eventually(t, fmt.Sprintf("secret %s/%s on %s is gone", namespace, name, s.name), func() error {
		err := s.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still present")
	})
}

// destroyEntry deletes a core BackupEntry as gardenlet's shoot deletion does and waits until it
// is gone.
func (r *run) destroyEntry(t *testing.T, e *entryRef) {
	t.Helper()
	if err := e.deployer.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.waitCleanup(t, e)
}

func (r *run) waitCleanup(t *testing.T, e *entryRef) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.deployer.WaitCleanup(ctx); err != nil {
		be, gerr := e.deployer.Get(context.Background())
		if gerr != nil {
			t.Fatalf("core BackupEntry %s not deleted: %v (%v)", e.name, err, gerr)
		}
		t.Fatalf("core BackupEntry %s not deleted: %v (lastOperation %s, lastError %s)", e.name, err, describeOp(be.Status.LastOperation), describeErr(be.Status.LastError))
	}
}

func (r *run) eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := stack.Poll(waitTimeout, waitInterval, what, func() (bool, string, error) {
		if err := f(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		t.Fatal(err)
	}
}

// backupFiles are files as etcd-backup-restore writes them, with their content.
type backupFiles map[string][]byte

// writeBackups writes snapshots under <root>/<bucket>/<entry>/etcd-main and etcd-events.
func writeBackups(t *testing.T, root, bucket, entry string) backupFiles {
	t.Helper()
	files := backupFiles{}
	now := time.Now().Unix()
	for _, rel := range []string{
		fmt.Sprintf("etcd-main/v2/Full-00000000-00000042-%d.gz", now),
		fmt.Sprintf("etcd-main/v2/Incr-00000043-00000050-%d.gz", now),
		fmt.Sprintf("etcd-events/v2/Full-00000000-00000007-%d.gz", now),
	} {
		path := filepath.Join(root, bucket, entry, rel)
		content := []byte("snapshot " + entry + "/" + rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		files[path] = content
	}
	return files
}

// copyBackups copies an entry's files from one bucket to another, as etcd's copy task does.
func copyBackups(t *testing.T, root, from, to, entry string) backupFiles {
	t.Helper()
	files := backupFiles{}
	src := filepath.Join(root, from, entry)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, to, entry, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		files[dst] = content
		return os.WriteFile(dst, content, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no backups under %s to copy", src)
	}
	return files
}

func expectPresent(t *testing.T, files backupFiles) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no files to check")
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("backup %s: %v", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("backup %s changed", path)
		}
	}
}

// expectGone waits until none of the files exists.
func expectGone(t *testing.T, files backupFiles) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no files to check")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		for path := range files {
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				left = append(left, path)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backups not purged: %v", left)
		}
		time.Sleep(waitInterval)
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func describeOp(op *gardencorev1beta1.LastOperation) string {
	if op == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s %q", op.Type, op.State, op.Description)
}

func describeErr(e *gardencorev1beta1.LastError) string {
	if e == nil {
		return "<none>"
	}
	return fmt.Sprintf("%q %v", e.Description, e.Codes)
}
