// Package seed runs housekeeper as it is deployed: on a real node (containerd, the kubelet,
// kube-proxy, kube-controller-manager, kube-scheduler, CoreDNS), its chart's pods started from the
// images `make release` published to a registry on loopback, NATS as three pods installed from
// infra/nats, and KEDA's operator as a pod scaling the functions. Everything is observed through
// the Kubernetes API and the object store (the local provider's directory), never through
// housekeeper's own report.
package seed

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

const (
	bucketName = "seed-e2e"
	entryName  = "shoot--dev--app--4c5e1"
	// neighbour is another shoot's prefix in the same bucket: the purge must leave it.
	neighbour = "shoot--dev--other--9a0b2"
)

func TestSeed(t *testing.T) {
	s := startSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// 1. At rest every function is at zero replicas, put there by KEDA's operator: the chart's
	// Deployments have no replicas field, so each started at one.
	s.awaitAtRest(ctx, "at rest after the install")

	// 2. A BackupBucket and a BackupEntry: KEDA scales the functions from zero, their pods start
	// from the images, the entry is Succeeded with etcd-backup; then back to zero.
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-credentials", Namespace: "garden"}})
	s.newBucketAndEntry(ctx, bucketName, entryName)
	s.awaitAtRest(ctx, "back at rest after the cooldown")
	s.operatorCLI(ctx)
	s.deadLetterRunbook(ctx)

	// 2b. A RestoreDrill: the drill function woken from zero holds its run to the memory limit
	// its pod has on the node; then back to zero.
	s.drillOnTheNode(ctx)
	s.awaitAtRest(ctx, "back at rest after the drill")

	// 3. The entry deleted with a retention: the purge comes due with its function at zero, KEDA
	// wakes it, exactly the entry's prefix is purged, the neighbour's objects stay.
	s.fill(ctx, entryName, 20)
	s.fill(ctx, neighbour, 20)
	due := s.deleteWithRetention(ctx, entryName, 12*time.Second)
	s.atZeroUntil(ctx, due, entryName, 20)
	s.awaitPurged(ctx, entryName, 2*time.Minute)
	t.Logf("due → purged and gone in %s (the purge function woken from zero by KEDA, polling every 2 s)", time.Since(due).Round(time.Millisecond))
	if n := s.objects(neighbour); n != 20 {
		t.Errorf("the neighbour's prefix %s holds %d objects after the purge, want its 20", neighbour, n)
	}
	s.ranFromImage(ctx, "purge", due, s.image())
	s.awaitAtRest(ctx, "back at rest after the purge")

	// 4. A function pod killed mid-purge, through the container runtime: it converges, the
	// prefix is purged, nothing else is lost.
	const killed, many = "shoot--dev--killed--7d1f0", 20000
	s.newEntry(ctx, killed)
	s.fill(ctx, killed, many)
	due = s.deleteWithRetention(ctx, killed, 12*time.Second)
	s.killMidPurge(ctx, killed, many)
	s.awaitPurged(ctx, killed, 3*time.Minute)
	t.Logf("due → purged and gone in %s with the purge function's container killed mid-purge", time.Since(due).Round(time.Millisecond))
	if n := s.objects(neighbour); n != 20 {
		t.Errorf("the neighbour's prefix %s holds %d objects after the killed purge, want its 20", neighbour, n)
	}

	// 5. A NATS pod deleted during a burst of 200 entries: all converge.
	s.burstWithNATSPodDeleted(ctx, 200)

	// 6. A chart upgrade to a new image tag while a purge is pending: the purge happens on time,
	// by the new image.
	const upgraded = "shoot--dev--upgraded--3e8a4"
	s.newEntry(ctx, upgraded)
	s.fill(ctx, upgraded, 20)
	// The retention outlasts an upgrade on a loaded machine (17 s seen in CI) with room to spare.
	due = s.deleteWithRetention(ctx, upgraded, 45*time.Second)
	s.tagRelease(newTag)
	values := maps.Clone(s.values)
	values["image"] = map[string]any{"registry": s.registry, "tag": newTag}
	upgradeStart := time.Now()
	s.installChart(ctx, values)
	s.values = values
	s.awaitRolledOut(ctx, "housekeeper-bridge", newTag, 3*time.Minute)
	t.Logf("chart upgraded to %s (bridge rolled out) in %s, %s before the purge is due", newTag, time.Since(upgradeStart).Round(time.Millisecond), time.Until(due).Round(time.Second))
	if time.Until(due) < 3*time.Second {
		t.Fatalf("the upgrade took until %s before the purge was due: it did not happen while the purge was pending", time.Until(due).Round(time.Second))
	}
	s.atZeroUntil(ctx, due, upgraded, 20)
	s.awaitPurged(ctx, upgraded, 2*time.Minute)
	if late := time.Since(due); late > 30*time.Second {
		t.Errorf("the purge pending across the upgrade happened %s after it was due", late.Round(time.Millisecond))
	} else {
		t.Logf("the purge pending across the upgrade: due → purged in %s", late.Round(time.Millisecond))
	}
	s.ranFromImage(ctx, "purge", due, s.image())
	if n := s.objects(neighbour); n != 20 {
		t.Errorf("the neighbour's prefix %s holds %d objects at the end, want its 20", neighbour, n)
	}
	s.awaitAtRest(ctx, "back at rest at the end")

	// 8. The Gardener install path on the same node: the by-hand release uninstalled, gardenlet
	// installs housekeeper from its registration, gardener-resource-manager applies it, and the
	// installation reads Installed and Healthy as an operator reads it, through a bucket and an
	// entry and the resource manager's next apply.
	s.installTheGardenerWay(ctx)
}

// image is the functions' image as installed, as the chart names it: the values' registry,
// and the image's digest from the values' digests (a release's registration pins them) or the
// values' tag (default v<appVersion>).
func (s *seed) image() string {
	img, _ := s.values["image"].(map[string]any)
	registry := fmt.Sprint(img["registry"])
	if digests, ok := img["digests"].(map[string]any); ok && digests["housekeeper"] != nil {
		return fmt.Sprintf("%s/housekeeper@%s", registry, digests["housekeeper"])
	}
	tag := "v" + chartAppVersion(s.t)
	if img["tag"] != nil {
		tag = fmt.Sprint(img["tag"])
	}
	return registry + "/housekeeper:" + tag
}

// shootNamespace is the seed namespace of an entry's shoot (shoot--<project>--<name>--<uid>).
func shootNamespace(entryName string) string {
	return entryName[:strings.LastIndex(entryName, "--")]
}

// newBucketAndEntry creates a BackupBucket of type local (its credentials the Secret
// garden/local-credentials) and then a BackupEntry in it, each waited for until Succeeded by a
// function pod of the release started after the change: the bucket's directory in the store,
// etcd-backup in the shoot's namespace naming the bucket.
func (s *seed) newBucketAndEntry(ctx context.Context, bucket, name string) {
	t := s.t
	t.Helper()
	bucketCreated := time.Now()
	s.create(ctx, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucket},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"}},
	})
	s.awaitSucceeded(ctx, &extensionsv1alpha1.BackupBucket{}, bucket, 3*time.Minute)
	t.Logf("BackupBucket %s created → Succeeded in %s", bucket, time.Since(bucketCreated).Round(time.Millisecond))
	if info, err := os.Stat(filepath.Join(s.root, bucket)); err != nil || !info.IsDir() {
		t.Errorf("the bucket's directory in the store: %v", err)
	}
	created := s.newEntryIn(ctx, bucket, name)
	t.Logf("BackupEntry %s created → Succeeded in %s", name, time.Since(created).Round(time.Millisecond))
	backup := &corev1.Secret{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: shootNamespace(name), Name: entry.SecretName}, backup); err != nil {
		t.Errorf("the shoot's %s Secret: %v", entry.SecretName, err)
	} else if string(backup.Data["bucketName"]) != bucket {
		t.Errorf("%s/%s names bucket %q, want %q", shootNamespace(name), entry.SecretName, backup.Data["bucketName"], bucket)
	}
	s.ranFromImage(ctx, "bucket", bucketCreated, s.image())
	s.ranFromImage(ctx, "entry", created, s.image())
}

// newEntry creates a BackupEntry in the bucket (and its shoot's namespace) and waits until it is
// Succeeded; it returns when it was created.
func (s *seed) newEntry(ctx context.Context, name string) time.Time {
	s.t.Helper()
	return s.newEntryIn(ctx, bucketName, name)
}

// newEntryIn is newEntry in the named bucket.
func (s *seed) newEntryIn(ctx context.Context, bucket, name string) time.Time {
	s.t.Helper()
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace(name)}})
	created := time.Now()
	s.create(ctx, newBackupEntryIn(bucket, name))
	s.awaitSucceeded(ctx, &extensionsv1alpha1.BackupEntry{}, name, 3*time.Minute)
	return created
}

func newBackupEntry(name string) *extensionsv1alpha1.BackupEntry {
	return newBackupEntryIn(bucketName, name)
}

// newBackupEntryIn is a BackupEntry of type local in the bucket, with the bucket's generated
// secret, as gardenlet creates it.
func newBackupEntryIn(bucketName, name string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, BucketName: bucketName, Region: "local",
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"}},
	}
}

// fill writes n snapshots under prefix into the bucket, owned by the functions' user as
// etcd-backup-restore writes them.
func (s *seed) fill(ctx context.Context, prefix string, n int) {
	s.t.Helper()
	store, err := local.New(s.root).Open(bucketName, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := range n {
		if err := objectstore.PutBytes(ctx, store, fmt.Sprintf("%s/etcd-main/v2/Incr-%d-%d-%d", prefix, i, i+1, 1700000000+i), []byte("snapshot")); err != nil {
			s.t.Fatal(err)
		}
	}
	chownTree(s.t, filepath.Join(s.root, bucketName, prefix), 65532)
}

// objects is the number of objects under prefix in the bucket.
func (s *seed) objects(prefix string) int {
	return count(s.t, filepath.Join(s.root, bucketName, prefix))
}

// deleteWithRetention deletes the entry with a retention and returns when its purge is due.
func (s *seed) deleteWithRetention(ctx context.Context, name string, retention time.Duration) time.Time {
	s.t.Helper()
	patch(ctx, s, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(be *extensionsv1alpha1.BackupEntry) {
		metav1.SetMetaDataAnnotation(&be.ObjectMeta, entry.AnnotationRetention, retention.String())
	})
	if err := s.c.Delete(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		s.t.Fatal(err)
	}
	be := &extensionsv1alpha1.BackupEntry{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: name}, be); err != nil || be.DeletionTimestamp == nil {
		s.t.Fatalf("the deleted entry %s: %v %+v", name, err, be.DeletionTimestamp)
	}
	return be.DeletionTimestamp.Add(retention)
}

// atZeroUntil checks, until shortly before due, that the purge function stays at zero and the
// entry's n objects stay.
func (s *seed) atZeroUntil(ctx context.Context, due time.Time, name string, n int) {
	s.t.Helper()
	for time.Until(due) > 3*time.Second {
		if r := s.replicas(ctx, "purge"); r != 0 {
			s.t.Fatalf("the purge function at %d replicas %s before the purge is due", r, time.Until(due).Round(time.Second))
		}
		if left := s.objects(name); left != n {
			s.t.Fatalf("%d of the entry's %d objects left %s before the purge is due", left, n, time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
}

// awaitPurged waits until the entry is gone and its prefix empty.
func (s *seed) awaitPurged(ctx context.Context, name string, timeout time.Duration) {
	s.t.Helper()
	s.eventually(timeout, "the entry "+name+" purged and gone", func() (bool, string) {
		err := s.c.Get(ctx, client.ObjectKey{Name: name}, &extensionsv1alpha1.BackupEntry{})
		left := s.objects(name)
		return apierrors.IsNotFound(err) && left == 0, fmt.Sprintf("entry: %v; %d objects left; purge at %d replicas", err, left, s.replicas(ctx, "purge"))
	})
}

// killMidPurge waits until the purge of name has deleted some but not all of its n objects and
// kills the purge function's container with SIGKILL through containerd. A purge that finished
// before it could be killed observed nothing: the test fails, saying so.
func (s *seed) killMidPurge(ctx context.Context, name string, n int) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		left := s.objects(name)
		if left == 0 {
			s.t.Fatalf("the purge of %d objects finished before its container could be killed: nothing observed", n)
		}
		if left < n {
			pods, err := s.cs.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=purge"})
			if err != nil {
				s.t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					continue
				}
				if err := s.node.KillContainer(ctx, s.namespace, p.Name, "purge"); err != nil {
					s.t.Fatalf("killing the purge container of %s: %v", p.Name, err)
				}
				s.t.Logf("killed the purge function's container in %s with %d of %d objects left", p.Name, left, n)
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("the purge of %s never began: nothing to kill", name)
}

// burstWithNATSPodDeleted creates n entries at once and deletes a NATS pod while they are
// handled; every entry converges.
func (s *seed) burstWithNATSPodDeleted(ctx context.Context, n int) {
	s.t.Helper()
	start := time.Now()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("shoot--burst--s%03d--%05x", i, i)
		s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace(names[i])}})
		s.create(ctx, newBackupEntry(names[i]))
		if i == n/4 {
			if err := s.cs.CoreV1().Pods(natsNamespace).Delete(ctx, "nats-1", metav1.DeleteOptions{}); err != nil {
				s.t.Fatalf("deleting NATS pod nats-1: %v", err)
			}
			s.t.Logf("deleted NATS pod nats-1 after %d of %d entries", i+1, n)
		}
	}
	s.eventually(5*time.Minute, fmt.Sprintf("%d entries Succeeded", n), func() (bool, string) {
		list := &extensionsv1alpha1.BackupEntryList{}
		if err := s.c.List(ctx, list); err != nil {
			return false, err.Error()
		}
		done := 0
		var stuck string
		for _, be := range list.Items {
			if !strings.HasPrefix(be.Name, "shoot--burst--") {
				continue
			}
			if op := be.Status.LastOperation; op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded {
				done++
			} else if stuck == "" {
				stuck = fmt.Sprintf("%s: %+v", be.Name, op)
			}
		}
		return done == n, fmt.Sprintf("%d of %d Succeeded; e.g. %s", done, n, stuck)
	})
	s.t.Logf("a burst of %d entries with a NATS pod deleted: all Succeeded in %s", n, time.Since(start).Round(time.Millisecond))
	s.awaitPods(ctx, natsNamespace, "app.kubernetes.io/name=nats", 3, 3*time.Minute)
}

// awaitRolledOut waits until the Deployment runs the image tag in all its ready replicas.
func (s *seed) awaitRolledOut(ctx context.Context, name, tag string, timeout time.Duration) {
	s.t.Helper()
	s.eventually(timeout, name+" rolled out with "+tag, func() (bool, string) {
		d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		img := d.Spec.Template.Spec.Containers[0].Image
		st := d.Status
		return strings.HasSuffix(img, ":"+tag) && st.ObservedGeneration == d.Generation && st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas && st.Replicas > 0,
			fmt.Sprintf("image %s, %d updated, %d ready of %d", img, st.UpdatedReplicas, st.ReadyReplicas, st.Replicas)
	})
}

// awaitAtRest waits until every function's Deployment is at zero replicas with no pod, each
// ScaledObject Ready and not in fallback (KEDA reads its consumer).
func (s *seed) awaitAtRest(ctx context.Context, what string) {
	s.t.Helper()
	start := time.Now()
	s.eventually(3*time.Minute, what, func() (bool, string) {
		var state []string
		ok := true
		for _, fn := range all.Names() {
			d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			ready := s.scaledObjectReady(ctx, fn)
			state = append(state, fmt.Sprintf("%s: %d/%d (ScaledObject %s)", fn, d.Status.Replicas, replicas, ready))
			ok = ok && replicas == 0 && d.Status.Replicas == 0 && ready == "Ready"
		}
		// No pod left either, terminating ones included: one could still take an event.
		pods, err := s.cs.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component in (" + strings.Join(all.Names(), ",") + ")"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			state = append(state, "pod "+podState(&p))
		}
		return ok && len(pods.Items) == 0, strings.Join(state, "; ")
	})
	s.t.Logf("%s: every function at 0 replicas (%s)", what, time.Since(start).Round(time.Millisecond))
}

// scaledObjectReady is the Ready condition of fn's ScaledObject, as KEDA's operator sets it.
func (s *seed) scaledObjectReady(ctx context.Context, fn string) string {
	so := &unstructured.Unstructured{}
	so.SetAPIVersion("keda.sh/v1alpha1")
	so.SetKind("ScaledObject")
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "housekeeper-" + fn}, so); err != nil {
		return err.Error()
	}
	conditions, _, _ := unstructured.NestedSlice(so.Object, "status", "conditions")
	byType := map[string]map[string]any{}
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		byType[fmt.Sprint(c["type"])] = c
	}
	switch ready, fallback := byType["Ready"], byType["Fallback"]; {
	case ready == nil:
		return "no Ready condition"
	case ready["status"] != "True":
		return fmt.Sprintf("not Ready: %v %v", ready["reason"], ready["message"])
	case fallback != nil && fallback["status"] == "True":
		// KEDA cannot read the lag and runs the fallback's replica.
		return fmt.Sprintf("in fallback: %v", fallback["message"])
	}
	return "Ready"
}

// replicas is fn's Deployment's spec.replicas.
func (s *seed) replicas(ctx context.Context, fn string) int32 {
	d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// ranFromImage checks that fn ran as a pod of image started after since: the kubelet's events
// of one of its pods (the image it found, then the container started).
func (s *seed) ranFromImage(ctx context.Context, fn string, since time.Time, image string) {
	s.t.Helper()
	events, err := s.cs.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(e.InvolvedObject.Name, "housekeeper-"+fn+"-") || e.Reason != "Pulled" {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		seen = append(seen, fmt.Sprintf("%s at %+.1fs: %s", e.InvolvedObject.Name, at.Sub(since).Seconds(), e.Message))
		if !at.Before(since.Truncate(time.Second)) && strings.Contains(e.Message, `"`+image+`"`) {
			s.t.Logf("the %s function ran in pod %s of %s, started %s after the change", fn, e.InvolvedObject.Name, image, at.Sub(since).Round(time.Second))
			return
		}
	}
	s.t.Errorf("no pod of the %s function was started from %s after the change (the kubelet's Pulled events: %v)", fn, image, seen)
}

func (s *seed) awaitSucceeded(ctx context.Context, obj extensionsv1alpha1.Object, name string, timeout time.Duration) {
	s.t.Helper()
	s.eventually(timeout, fmt.Sprintf("%T %s Succeeded", obj, name), func() (bool, string) {
		if err := s.c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return false, err.Error()
		}
		op := obj.GetExtensionStatus().GetLastOperation()
		if op == nil {
			return false, "no lastOperation"
		}
		state := fmt.Sprintf("%s/%s %q", op.Type, op.State, op.Description)
		if le := obj.GetExtensionStatus().GetLastError(); le != nil {
			state += " lastError " + le.Description
		}
		return op.State == gardencorev1beta1.LastOperationStateSucceeded, state
	})
}

// patch reads obj (its name set) from the seed, applies change and writes the difference as a
// merge patch.
func patch[T client.Object](ctx context.Context, s *seed, obj T, change func(T)) {
	s.t.Helper()
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		s.t.Fatal(err)
	}
	base := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	change(obj)
	if err := s.c.Patch(ctx, obj, base); err != nil {
		s.t.Fatal(err)
	}
}

// count is the number of files under dir (0 when it is gone).
func count(t testing.TB, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

func chownTree(t testing.TB, dir string, uid int) {
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// operatingBlock is the ```sh block of infra/docs/operating.md that holds marker.
func (s *seed) operatingBlock(marker string) string {
	root, err := stack.RepoRoot()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, block := range strings.Split(string(s.read(filepath.Join(root, "infra/docs/operating.md"))), "```sh\n")[1:] {
		if block, _, _ = strings.Cut(block, "```"); strings.Contains(block, marker) {
			return block
		}
	}
	s.t.Fatalf("infra/docs/operating.md has no sh block with %q", marker)
	return ""
}

// kubectlScript runs script with bash in dir, kubectl on its PATH and the seed's kubeconfig.
func (s *seed) kubectlScript(ctx context.Context, dir, script string) ([]byte, error) {
	tools, err := stack.InstalledDockerTools()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(s.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, s.kube.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Dir(tools.Kubectl)+":"+os.Getenv("PATH"))
	return cmd.CombinedOutput()
}

// operatorCLI runs infra/docs/operating.md's commands that run the operators' tool in the seed
// (Running the CLI in a seed: the operator identity given for the session, `hk deadletters
// list` in a pod, the identity taken back) as written, with this seed's image and nats-auth's
// directory in place of the document's: the pod reaches NATS through the release's policies,
// with the operator identity, and lists.
func (s *seed) operatorCLI(ctx context.Context) {
	t := s.t
	start := time.Now()
	out := s.runCLI(ctx, s.cliBlock())
	if !regexp.MustCompile(`(?m)^\d+ dead letters, \d+ resolved$`).Match(out) {
		t.Fatalf("housekeeper-cli did not list the dead letters:\n%s", out)
	}
	t.Logf("infra/docs/operating.md's housekeeper-cli commands listed the dead letters in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
}

// cliBlock is infra/docs/operating.md's block that runs the operators' tool in the seed, with
// this seed's image in place of the document's.
func (s *seed) cliBlock() string {
	const readmeImage = "ghcr.io/housekeeper-dev/housekeeper:v0.1.0"
	script := s.operatingBlock("run housekeeper-cli")
	if !strings.Contains(script, readmeImage) || !strings.Contains(script, "nats-auth/") {
		s.t.Fatalf("infra/docs/operating.md has no block running housekeeper-cli with %s and nats-auth/: %q", readmeImage, script)
	}
	return strings.ReplaceAll(script, readmeImage, s.image())
}

// runCLI runs script, lines of cliBlock, where nats-auth/ is the directory `housekeeper
// nats-auth` wrote the seed's identities to, and checks that it left neither the operator
// identity's Secret nor the CLI's pod behind.
func (s *seed) runCLI(ctx context.Context, script string) []byte {
	t := s.t
	t.Helper()
	work := t.TempDir()
	if err := os.Symlink(s.issued.Dir, filepath.Join(work, "nats-auth")); err != nil {
		t.Fatal(err)
	}
	out, err := s.kubectlScript(ctx, work, script)
	if err != nil {
		t.Fatalf("infra/docs/operating.md's housekeeper-cli commands: %v\n%s", err, out)
	}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: hkNamespace, Name: "housekeeper-operator"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator identity's Secret is still there after the commands: %v", err)
	}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: hkNamespace, Name: "housekeeper-cli"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the CLI's pod is still there after the commands (kubectl delete waits until it is gone): %v", err)
	}
	return out
}
