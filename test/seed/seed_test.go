// Package seed runs housekeeper as it is deployed: on a real node (containerd, the kubelet,
// kube-proxy, kube-controller-manager, kube-scheduler, CoreDNS), its chart's pods started from the
// images `make images` builds, NATS as three pods installed from infra/nats, and KEDA's operator
// as a pod scaling the functions. Everything is observed through the Kubernetes API and the
// object store (the local provider's directory), never through housekeeper's own report.
package seed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

const (
	bucketName = "seed-e2e"
	shootNS    = "shoot--dev--app"
	entryName  = "shoot--dev--app--4c5e1"
	// neighbour is another shoot's prefix in the same bucket: the purge must leave it.
	neighbour = "shoot--dev--other--9a0b2"
)

func TestSeed(t *testing.T) {
	s := startSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// 1. At rest every function is at zero replicas, put there by KEDA's operator: the chart's
	// Deployments have no replicas field, so each started at one.
	s.awaitAtRest(ctx, "at rest after the install")

	// 2. A BackupBucket and a BackupEntry: KEDA scales the functions from zero, their pods start
	// from the images, the entry is Succeeded with etcd-backup; then back to zero.
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNS}})
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-credentials", Namespace: "garden"}})
	bucketCreated := time.Now()
	s.create(ctx, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"}},
	})
	s.awaitSucceeded(ctx, &extensionsv1alpha1.BackupBucket{}, bucketName, 3*time.Minute)
	t.Logf("BackupBucket created → Succeeded in %s", time.Since(bucketCreated).Round(time.Millisecond))
	if info, err := os.Stat(filepath.Join(s.root, bucketName)); err != nil || !info.IsDir() {
		t.Errorf("the bucket's directory in the store: %v", err)
	}
	created := time.Now()
	s.create(ctx, &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: entryName},
		Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, BucketName: bucketName, Region: "local",
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"}},
	})
	s.awaitSucceeded(ctx, &extensionsv1alpha1.BackupEntry{}, entryName, 3*time.Minute)
	t.Logf("BackupEntry created → Succeeded in %s", time.Since(created).Round(time.Millisecond))
	backup := &corev1.Secret{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: shootNS, Name: entry.SecretName}, backup); err != nil {
		t.Errorf("the shoot's %s Secret: %v", entry.SecretName, err)
	} else if string(backup.Data["bucketName"]) != bucketName {
		t.Errorf("%s/%s names bucket %q, want %q", shootNS, entry.SecretName, backup.Data["bucketName"], bucketName)
	}
	s.ranFromImage(ctx, "bucket", bucketCreated)
	s.ranFromImage(ctx, "entry", created)
	s.awaitAtRest(ctx, "back at rest after the cooldown")

	// 3. The entry deleted with a retention: the purge comes due with its function at zero, KEDA
	// wakes it, exactly the entry's prefix is purged, the neighbour's objects stay.
	store, err := local.New(s.root).Open(bucketName, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{entryName, neighbour} {
		for i := range 20 {
			if err := store.Put(ctx, fmt.Sprintf("%s/etcd-main/v2/Incr-%d-%d-%d", prefix, i, i+1, 1700000000+i), []byte("snapshot")); err != nil {
				t.Fatal(err)
			}
		}
	}
	chownTree(t, filepath.Join(s.root, bucketName), 65532) // as etcd-backup-restore writes them
	const retention = 30 * time.Second
	s.patchEntry(ctx, func(be *extensionsv1alpha1.BackupEntry) {
		metav1.SetMetaDataAnnotation(&be.ObjectMeta, entry.AnnotationRetention, retention.String())
	})
	if err := s.c.Delete(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName}}); err != nil {
		t.Fatal(err)
	}
	be := &extensionsv1alpha1.BackupEntry{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: entryName}, be); err != nil || be.DeletionTimestamp == nil {
		t.Fatalf("the deleted entry: %v %+v", err, be.DeletionTimestamp)
	}
	due := be.DeletionTimestamp.Add(retention)
	// Until it is due the purge function stays at zero, and nothing is deleted.
	for time.Until(due) > 3*time.Second {
		if n := s.replicas(ctx, "purge"); n != 0 {
			t.Fatalf("the purge function at %d replicas %s before the purge is due", n, time.Until(due).Round(time.Second))
		}
		if n := count(t, filepath.Join(s.root, bucketName, entryName)); n != 20 {
			t.Fatalf("%d of the entry's 20 objects left %s before the purge is due", n, time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	s.eventually(2*time.Minute, "the entry purged and gone", func() (bool, string) {
		err := s.c.Get(ctx, client.ObjectKey{Name: entryName}, &extensionsv1alpha1.BackupEntry{})
		left := count(t, filepath.Join(s.root, bucketName, entryName))
		return apierrors.IsNotFound(err) && left == 0, fmt.Sprintf("entry: %v; %d objects left; purge at %d replicas", err, left, s.replicas(ctx, "purge"))
	})
	t.Logf("due → purged and gone in %s (the purge function woken from zero by KEDA, polling every 2 s)", time.Since(due).Round(time.Millisecond))
	if n := count(t, filepath.Join(s.root, bucketName, neighbour)); n != 20 {
		t.Errorf("the neighbour's prefix %s holds %d objects after the purge, want its 20", neighbour, n)
	}
	s.ranFromImage(ctx, "purge", due)
	s.awaitAtRest(ctx, "back at rest after the purge")
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
			d, err := s.cs.AppsV1().Deployments(hkNamespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
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
		pods, err := s.cs.CoreV1().Pods(hkNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component in (" + strings.Join(all.Names(), ",") + ")"})
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
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: hkNamespace, Name: "housekeeper-" + fn}, so); err != nil {
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
	d, err := s.cs.AppsV1().Deployments(hkNamespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// ranFromImage checks that fn ran as a pod of the chart's image started after since: the
// kubelet's Started event of one of its pods, and the image is housekeeper's.
func (s *seed) ranFromImage(ctx context.Context, fn string, since time.Time) {
	s.t.Helper()
	events, err := s.cs.CoreV1().Events(hkNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var started []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, "housekeeper-"+fn+"-") && e.Reason == "Started" {
			at := e.LastTimestamp.Time
			if at.IsZero() {
				at = e.EventTime.Time
			}
			started = append(started, fmt.Sprintf("%s at %+.1fs", e.InvolvedObject.Name, at.Sub(since).Seconds()))
			if !at.Before(since.Truncate(time.Second)) {
				s.t.Logf("the %s function ran in pod %s, started %s after the change", fn, e.InvolvedObject.Name, at.Sub(since).Round(time.Second))
				return
			}
		}
	}
	s.t.Errorf("no pod of the %s function was started by the kubelet after the change (Started events: %v)", fn, started)
	d, err := s.cs.AppsV1().Deployments(hkNamespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "ghcr.io/housekeeper-dev/housekeeper:v") {
		s.t.Errorf("the %s function runs image %s, not housekeeper's", fn, img)
	}
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

func (s *seed) patchEntry(ctx context.Context, change func(*extensionsv1alpha1.BackupEntry)) {
	s.t.Helper()
	be := &extensionsv1alpha1.BackupEntry{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: entryName}, be); err != nil {
		s.t.Fatal(err)
	}
	patch := client.MergeFrom(be.DeepCopy())
	change(be)
	if err := s.c.Patch(ctx, be, patch); err != nil {
		s.t.Fatal(err)
	}
}

// count is the number of files under dir (0 when it is gone).
func count(t *testing.T, dir string) int {
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

func chownTree(t *testing.T, dir string, uid int) {
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
