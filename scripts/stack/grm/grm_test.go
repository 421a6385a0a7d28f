package grm_test

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	resourcemanagerclient "github.com/gardener/gardener/pkg/resourcemanager/client"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

// A Job of a ManagedResource: applied, healthy though it never runs (no node here), reported
// missing once deleted, and created again — at once when the ManagedResource was healthy (the
// managedresource controller wakes on ResourcesHealthy turning from True to False), else only by
// the next periodic apply (SyncPeriod) or a Resync.
func TestJobOfAManagedResource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	kube, err := stack.StartKube(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Stop() })
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gardener/gardener").Output()
	if err != nil {
		t.Fatalf("locating the gardener module: %v", err)
	}
	crd := filepath.Join(strings.TrimSpace(string(out)), "example", "seed-crds", "10-crd-resources.gardener.cloud_managedresources.yaml")
	if _, err := envtest.InstallCRDs(kube.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(kube.Config, client.Options{Scheme: resourcemanagerclient.CombinedScheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"garden", "work"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	rm, err := grm.Start(grm.Options{Source: kube.Config})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rm.Stop(); err != nil {
			t.Error(err)
		}
	})

	// Healthy, then the Job deleted: JobMissing, and a new Job at once.
	healthy := managedResource(ctx, t, c, "healthy", job("setup"))
	expect(t, c, healthy, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy")
	first := getJob(ctx, t, c, "setup")
	reasons := watchHealthReasons(ctx, t, kube.Config, healthy)
	deleteJob(ctx, t, c, first)
	poll(t, "a new Job", func() error {
		j := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "work", Name: "setup"}, j); err != nil {
			return err
		}
		if j.UID == first.UID {
			return fmt.Errorf("the deleted one")
		}
		return nil
	})
	expect(t, c, healthy, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy")
	// JobMissing lasts milliseconds: a watch sees it.
	if got := reasons(); !strings.Contains(got, "JobMissing") {
		t.Errorf("ResourcesHealthy reasons while the Job was gone: %s, want JobMissing among them", got)
	}

	// Unhealthy from the start for another reason (a Deployment no controller rolls out), then
	// the Job deleted: nothing wakes the managedresource controller, and the Job stays deleted
	// until the next apply (SyncPeriod; Resync).
	unhealthy := managedResource(ctx, t, c, "unhealthy", deployment("never-rolled-out"), job("other"))
	expect(t, c, unhealthy, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "DeploymentUnhealthy")
	deleteJob(ctx, t, c, getJob(ctx, t, c, "other"))
	time.Sleep(time.Second)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "work", Name: "other"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Job other after its deletion, the ManagedResource unhealthy: %v, want NotFound until the next apply", err)
	}
	if err := rm.Resync(ctx, unhealthy); err != nil {
		t.Fatal(err)
	}
	poll(t, "Job other again", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: "work", Name: "other"}, &batchv1.Job{})
	})

	// A short SyncPeriod applies by itself.
	if err := rm.Stop(); err != nil {
		t.Fatal(err)
	}
	rm, err = grm.Start(grm.Options{Source: kube.Config, SyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Twice: a resource manager that starts applies every ManagedResource once, which may be
	// what brings the Job back the first time.
	for range 2 {
		deleteJob(ctx, t, c, getJob(ctx, t, c, "other"))
		poll(t, "Job other applied by the periodic sync", func() error {
			return c.Get(ctx, client.ObjectKey{Namespace: "work", Name: "other"}, &batchv1.Job{})
		})
	}
}

// watchHealthReasons watches the ManagedResource and returns a function that stops the watch
// and says the reasons of ResourcesHealthy it saw, in order.
func watchHealthReasons(ctx context.Context, t *testing.T, cfg *rest.Config, key types.NamespacedName) func() string {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: resourcemanagerclient.CombinedScheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &resourcesv1alpha1.ManagedResourceList{}, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		var seen []string
		for ev := range w.ResultChan() {
			mr, ok := ev.Object.(*resourcesv1alpha1.ManagedResource)
			if !ok {
				continue
			}
			for _, cond := range mr.Status.Conditions {
				if cond.Type == resourcesv1alpha1.ResourcesHealthy && (len(seen) == 0 || seen[len(seen)-1] != cond.Reason) {
					seen = append(seen, cond.Reason)
				}
			}
		}
		done <- seen
	}()
	return func() string {
		w.Stop()
		return strings.Join(<-done, " → ")
	}
}

func deployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: work
spec:
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: c
          image: example.invalid/none
`, name)
}

func job(name string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: work
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: c
          image: example.invalid/none
`, name)
}

// managedResource creates a ManagedResource of the seed class in garden, its objects in a Secret.
func managedResource(ctx context.Context, t *testing.T, c client.Client, name string, objects ...string) types.NamespacedName {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "managedresource-" + name, Namespace: "garden"},
		Data:       map[string][]byte{"objects.yaml": []byte(strings.Join(objects, "---\n"))},
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	mr := &resourcesv1alpha1.ManagedResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "garden"},
		Spec: resourcesv1alpha1.ManagedResourceSpec{
			Class:      ptr.To(grm.SeedClass),
			SecretRefs: []corev1.LocalObjectReference{{Name: secret.Name}},
		},
	}
	if err := c.Create(ctx, mr); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(mr)
	expect(t, c, key, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionTrue, resourcesv1alpha1.ConditionApplySucceeded)
	return key
}

func getJob(ctx context.Context, t *testing.T, c client.Client, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "work", Name: name}, j); err != nil {
		t.Fatal(err)
	}
	return j
}

// deleteJob deletes j as the TTL-after-finished controller would, but with background
// propagation: no garbage collector runs here to finish a foreground deletion.
func deleteJob(ctx context.Context, t *testing.T, c client.Client, j *batchv1.Job) {
	t.Helper()
	if err := c.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID}); err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, c client.Client, key types.NamespacedName, typ gardencorev1beta1.ConditionType, status gardencorev1beta1.ConditionStatus, reason string) {
	t.Helper()
	poll(t, fmt.Sprintf("ManagedResource %s %s=%s/%s", key.Name, typ, status, reason), func() error {
		mr := &resourcesv1alpha1.ManagedResource{}
		if err := c.Get(context.Background(), key, mr); err != nil {
			return err
		}
		for _, cond := range mr.Status.Conditions {
			if cond.Type == typ {
				if cond.Status == status && cond.Reason == reason {
					return nil
				}
				return fmt.Errorf("%s=%s/%s %q", typ, cond.Status, cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("no %s", typ)
	})
}

func poll(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := stack.Poll(30*time.Second, 50*time.Millisecond, what, func() (bool, string, error) {
		if err := f(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		t.Fatal(err)
	}
}
