package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	"github.com/gardener/gardener/pkg/component"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	stackgarden "github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

// housekeeper enters a landscape the Gardener way. gardener-apiserver accepts its
// ControllerRegistration beside a provider extension's that no longer claims the backup kinds
// (left out, or kept as non-primary), and refuses the provider's registration as shipped —
// primary for BackupBucket/azure too — with its own message. gardenlet's ControllerInstallation
// reconciler then installs housekeeper into a seed from its ControllerDeployment: it renders the
// chart with the seed's values into a ManagedResource. The seed's gardener-resource-manager
// (scripts/stack/grm: its own controllers) applies it and reports its health, and gardenlet's
// ControllerInstallation care controller turns that into the installation's conditions, which
// the test reads as an operator does.
//
// No node runs in this seed: no Deployment is ever rolled out and no Job ever runs. What the
// resource manager reports of that is asserted too.
func testRegistration(t *testing.T, g *garden, l *logs) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No OCI registry here: the chart travels in the ControllerDeployment, as helm.rawChart.
	reg, dep, err := stackgarden.ReadRegistration()
	if err != nil {
		t.Fatal(err)
	}
	// The NATS identities the ControllerDeployment references, given once in the garden.
	for _, obj := range []client.Object{stackgarden.PlaceholderNATSIdentities(hkcli.WorkloadIdentities()), dep, reg} {
		if err := g.client.Create(ctx, obj); err != nil {
			t.Fatalf("gardener-apiserver refuses housekeeper's %T: %v", obj, err)
		}
	}

	// The provider's registration as shipped is primary for the backup kinds too: refused.
	providerKinds := []gardencorev1beta1.ControllerResource{
		{Kind: "Infrastructure", Type: "azure"}, {Kind: "ControlPlane", Type: "azure"}, {Kind: "Worker", Type: "azure"},
	}
	asShipped := &gardencorev1beta1.ControllerRegistration{ObjectMeta: metav1.ObjectMeta{Name: "provider-azure"},
		Spec: gardencorev1beta1.ControllerRegistrationSpec{Resources: append(slices.Clone(providerKinds),
			gardencorev1beta1.ControllerResource{Kind: "BackupBucket", Type: "azure"}, gardencorev1beta1.ControllerResource{Kind: "BackupEntry", Type: "azure"})}}
	err = g.client.Create(ctx, asShipped)
	const refusal = "another ControllerRegistration resource already exists that controls resource BackupBucket/azure primarily"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refusal) {
		t.Errorf("the provider's registration as shipped beside housekeeper's: %v, want gardener-apiserver's refusal %q", err, refusal)
	}
	// Without the backup kinds, or with them not primary, it is accepted.
	without := &gardencorev1beta1.ControllerRegistration{ObjectMeta: metav1.ObjectMeta{Name: "provider-azure"},
		Spec: gardencorev1beta1.ControllerRegistrationSpec{Resources: providerKinds}}
	nonPrimary := &gardencorev1beta1.ControllerRegistration{ObjectMeta: metav1.ObjectMeta{Name: "provider-azure-backup-not-primary"},
		Spec: gardencorev1beta1.ControllerRegistrationSpec{Resources: []gardencorev1beta1.ControllerResource{
			{Kind: "BackupBucket", Type: "azure", Primary: ptr.To(false)}, {Kind: "BackupEntry", Type: "azure", Primary: ptr.To(false)},
		}}}
	for _, r := range []*gardencorev1beta1.ControllerRegistration{without, nonPrimary} {
		if err := g.client.Create(ctx, r); err != nil {
			t.Errorf("ControllerRegistration %s beside housekeeper's: %v", r.Name, err)
		}
	}

	seed, seedClient := registrationSeed(ctx, t, g, l)
	installation := &gardencorev1beta1.ControllerInstallation{
		ObjectMeta: metav1.ObjectMeta{Name: "housekeeper-x7k2p"},
		Spec: gardencorev1beta1.ControllerInstallationSpec{
			RegistrationRef: corev1.ObjectReference{Name: reg.Name},
			DeploymentRef:   &corev1.ObjectReference{Name: dep.Name},
			SeedRef:         &corev1.ObjectReference{Name: seed.Name},
		},
	}
	if err := g.client.Create(ctx, installation); err != nil {
		t.Fatal(err)
	}
	if err := seedClient.gardenlet.ReconcileInstallation(ctx, installation.Name); err != nil {
		t.Fatal(err)
	}
	if err := g.client.Get(ctx, client.ObjectKeyFromObject(installation), installation); err != nil {
		t.Fatal(err)
	}
	valid := stackgarden.ConditionOf(installation.Status.Conditions, gardencorev1beta1.ControllerInstallationValid)
	if valid == nil || valid.Status != gardencorev1beta1.ConditionTrue {
		t.Fatalf("ControllerInstallation Valid = %+v, want True (the chart rendered)", valid)
	}

	objs := managedObjects(ctx, t, seedClient.client, installation.Name)
	namespace := "extension-" + installation.Name
	for _, obj := range objs {
		if isSeedDashboard(obj) {
			// The one object outside: the seed's Plutono reads dashboards from garden only.
			if obj.GetNamespace() != v1beta1constants.GardenNamespace {
				t.Errorf("dashboard ConfigMap %s in %s, want %s", obj.GetName(), obj.GetNamespace(), v1beta1constants.GardenNamespace)
			}
			continue
		}
		if obj.GetNamespace() != "" && obj.GetNamespace() != namespace {
			t.Errorf("%s %s: namespace %s, want the installation's %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), namespace)
		}
		checkInstalled(t, obj, seed.Name)
	}
	t.Run("nothing-expires", func(t *testing.T) { testNothingExpires(t, objs) })

	// gardener-resource-manager applies the ManagedResource. The seed has no KEDA yet: it
	// applies everything else (ScaledObjects, of a kind it does not know, come last) and
	// refuses the ScaledObjects, and the installation is not Installed until KEDA's CRDs are
	// there.
	w := &installationWatch{t: t, seed: seedClient, garden: g.client, gardenRest: g.cfg,
		mr: client.ObjectKey{Namespace: v1beta1constants.GardenNamespace, Name: installation.Name}, installation: installation.Name}
	w.expectMR("gardener-resource-manager refuses the ScaledObjects without KEDA's CRD", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionFalse, resourcesv1alpha1.ConditionApplyFailed, `no matches for kind "ScaledObject"`)
	})
	// gardenlet's care controller reads the ManagedResource's observed generation before its
	// conditions: a ManagedResource never applied in full says only that, not why.
	w.expectInstallation("the installation is not Installed without KEDA", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationInstalled, gardencorev1beta1.ConditionFalse, "InstallationPending",
			fmt.Sprintf("observed generation of managed resource %s outdated (0/1)", w.mr))
	})
	w.log("without KEDA")
	installKEDACRDs(t, seedClient.cfg)
	// The controller retries the failed apply with back-off (5 ms, doubling, up to 1000 s), and
	// applies every hour anyway; a resource manager that starts applies at once. Restarted here,
	// so that no retry of the failed applies is left queued: it would create the Job that
	// setup-job-deleted deletes again.
	seedClient.startResourceManager(t)
	mr := w.expectMR("gardener-resource-manager applies every object", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionTrue, resourcesv1alpha1.ConditionApplySucceeded, "All resources are applied.")
	})
	w.expectInstallation("the installation is Installed", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationInstalled, gardencorev1beta1.ConditionTrue, "InstallationSuccessful", "")
	})

	// What it applied is on the seed, marked as the ManagedResource's.
	applied := map[string]int{}
	for _, ref := range mr.Status.Resources {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(ref.APIVersion)
		obj.SetKind(ref.Kind)
		if err := seedClient.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
			t.Errorf("%s %s/%s, applied by gardener-resource-manager: %v", ref.Kind, ref.Namespace, ref.Name, err)
			continue
		}
		if origin := obj.GetAnnotations()[resourcesv1alpha1.OriginAnnotation]; origin != w.mr.String() {
			t.Errorf("%s %s: origin %q, want the ManagedResource %s", ref.Kind, ref.Name, origin, w.mr)
		}
		applied[ref.Kind]++
	}
	if len(mr.Status.Resources) != len(objs) {
		t.Errorf("gardener-resource-manager lists %d objects, the ManagedResource holds %d", len(mr.Status.Resources), len(objs))
	}
	t.Logf("gardener-resource-manager applied into %s: %v", namespace, applied)
	for _, kind := range []string{"Deployment", "ConfigMap", "Job", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"PodDisruptionBudget", "NetworkPolicy", "ValidatingAdmissionPolicy", "CustomResourceDefinition", "PodMonitor",
		"PrometheusRule", "VerticalPodAutoscaler", "FlowSchema", "ScaledObject"} {
		if applied[kind] == 0 {
			t.Errorf("the installation applied no %s", kind)
		}
	}

	// No node: no deployment controller writes a Deployment's status. The health controller
	// checks status.resources in order (group/kind/namespace/name) and reports the first
	// unhealthy object: a Deployment whose rollout was never observed.
	w.expectMR("gardener-resource-manager finds the Deployments unhealthy", func(mr *resourcesv1alpha1.ManagedResource) error {
		if err := stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "DeploymentUnhealthy", "observed generation outdated (0/1)"); err != nil {
			return err
		}
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesProgressing, gardencorev1beta1.ConditionTrue, "DeploymentProgressing", "observed generation outdated (0/1)")
	})
	w.expectInstallation("the installation is not Healthy", func(ci *gardencorev1beta1.ControllerInstallation) error {
		// The care controller copies the ManagedResource's message, not its reason.
		if err := stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionFalse, "ControllerNotHealthy", "is unhealthy: observed generation outdated (0/1)"); err != nil {
			return err
		}
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationProgressing, gardencorev1beta1.ConditionTrue, "ControllerNotRolledOut", "")
	})
	w.log("no node")

	t.Run("setup-job-deleted", func(t *testing.T) {
		sub := *w
		sub.t = t
		testSetupJobDeleted(ctx, &sub)
	})
}

// testNothingExpires: no object of the ManagedResource is deleted by a controller after a time.
// gardener-resource-manager reports a listed object that is gone as <Kind>Missing
// (setup-job-deleted shows it), so an object that expires turns the installation unhealthy.
func testNothingExpires(t *testing.T, objs []*unstructured.Unstructured) {
	for _, obj := range objs {
		if why := expires(obj); why != "" {
			t.Errorf("%s %s/%s %s: gardener-resource-manager would report it %sMissing once it is gone", obj.GetKind(), obj.GetNamespace(), obj.GetName(), why, obj.GetKind())
		}
	}
	// The check itself: a Job of the chart as it was before (ttlSecondsAfterFinished: 600).
	for _, obj := range objs {
		if obj.GetKind() != "Job" {
			continue
		}
		old := obj.DeepCopy()
		if err := unstructured.SetNestedField(old.Object, int64(600), "spec", "ttlSecondsAfterFinished"); err != nil {
			t.Fatal(err)
		}
		if expires(old) == "" {
			t.Errorf("a Job with ttlSecondsAfterFinished is not found to expire")
		}
	}
}

// expires says how obj is deleted after a time, "" if it is not: kube-controller-manager's
// TTL-after-finished controller deletes a finished Job with spec.ttlSecondsAfterFinished, and
// each Job a CronJob creates with one.
func expires(obj *unstructured.Unstructured) string {
	var path []string
	switch obj.GetKind() {
	case "Job":
		path = []string{"spec", "ttlSecondsAfterFinished"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "ttlSecondsAfterFinished"}
	default:
		return ""
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, path...); ok {
		return fmt.Sprintf("has %s: %v", strings.Join(path, "."), v)
	}
	return ""
}

// testSetupJobDeleted deletes the setup Job as kube-controller-manager's TTL-after-finished
// controller would (with ttlSecondsAfterFinished, which the chart no longer sets), and reads
// what gardener-resource-manager and gardenlet make of it:
//
//   - while the installation is unhealthy anyway, nothing notices: the Job stays deleted;
//   - once everything else is healthy, the health controller reports ResourcesHealthy=False
//     JobMissing, the installation Healthy=False, and the Job stays deleted until the next apply
//     (hourly; Resync here);
//   - deleted while the installation is healthy, the change of ResourcesHealthy to False makes
//     the managedresource controller apply at once: a new Job, which would run the setup again.
func testSetupJobDeleted(ctx context.Context, w *installationWatch) {
	t := w.t
	c := w.seed.client
	mr := w.getMR()
	var job *batchv1.Job
	for _, ref := range mr.Status.Resources {
		if ref.Kind == "Job" {
			job = &batchv1.Job{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, job); err != nil {
				t.Fatal(err)
			}
		}
	}
	if job == nil {
		t.Fatal("the ManagedResource lists no Job")
	}
	jobKey := client.ObjectKeyFromObject(job)
	missing := fmt.Sprintf("Required Job %q in namespace %q is missing", job.Name, job.Namespace)

	// 1. Deleted while the Deployments are unhealthy: the first unhealthy object is still a
	// Deployment, and nothing applies the ManagedResource again.
	deleteAsTTLController(ctx, t, c, job)
	w.never("the Job comes back while the installation is unhealthy", time.Second, func() error {
		return jobAbsent(ctx, c, jobKey)
	})
	w.expectMR("gardener-resource-manager still reports a Deployment", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "DeploymentUnhealthy", "")
	})

	// 2. The Deployments roll out (standing in for kube-controller-manager and a node): the
	// health controller gets to the Job.
	rollOutDeployments(ctx, t, c, mr)
	w.expectMR("gardener-resource-manager reports the Job missing", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "JobMissing", missing)
	})
	w.expectInstallation("the installation is not Healthy for the missing Job", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionFalse, "ControllerNotHealthy", missing)
	})
	w.log("Job deleted, Deployments rolled out")
	// ResourcesHealthy went from False to False: the managedresource controller is not woken;
	// the Job stays missing until the ManagedResource is applied again (every hour).
	w.never("the Job comes back before the next apply", time.Second, func() error {
		return jobAbsent(ctx, c, jobKey)
	})

	// 3. The next apply (hourly in a seed; forced here) creates the Job again.
	if err := w.seed.grm.Resync(ctx, w.mr); err != nil {
		t.Fatal(err)
	}
	w.expectMR("gardener-resource-manager finds everything healthy", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", "All resources are healthy.")
	})
	w.expectInstallation("the installation is Healthy", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionTrue, "ControllerHealthy", "")
	})
	w.log("after the next apply")

	// 4. Deleted while healthy: ResourcesHealthy turns False, which wakes the managedresource
	// controller (its predicate ConditionChangedToUnhealthy): a new Job at once.
	again := &batchv1.Job{}
	if err := c.Get(ctx, jobKey, again); err != nil {
		t.Fatal(err)
	}
	mrSeen := recordConditions(t, w.seed.cfg, kubernetes.SeedScheme, &resourcesv1alpha1.ManagedResourceList{}, w.mr,
		resourcesv1alpha1.ResourcesApplied, resourcesv1alpha1.ResourcesHealthy)
	ciSeen := recordConditions(t, w.gardenRest, kubernetes.GardenScheme, &gardencorev1beta1.ControllerInstallationList{}, client.ObjectKey{Name: w.installation},
		gardencorev1beta1.ControllerInstallationHealthy)
	deleteAsTTLController(ctx, t, c, again)
	w.eventually("gardener-resource-manager creates the Job again by itself", func() error {
		recreated := &batchv1.Job{}
		if err := c.Get(ctx, jobKey, recreated); err != nil {
			return err
		}
		if recreated.UID == again.UID {
			return errors.New("still the deleted Job")
		}
		return nil
	})
	w.expectMR("gardener-resource-manager finds everything healthy again", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", "")
	})
	w.expectInstallation("the installation is Healthy again", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return stackgarden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionTrue, "ControllerHealthy", "")
	})
	mrStates, ciStates := mrSeen.Stop(), ciSeen.Stop()
	t.Logf("ManagedResource while the Job was deleted while healthy: %s", strings.Join(mrStates, " → "))
	t.Logf("ControllerInstallation meanwhile: %s", strings.Join(ciStates, " → "))
	if !slices.ContainsFunc(mrStates, func(s string) bool { return strings.Contains(s, "ResourcesHealthy=False/JobMissing") }) {
		t.Errorf("the ManagedResource never reported JobMissing: %v", mrStates)
	}
}

// deleteAsTTLController deletes job as kube-controller-manager's TTL-after-finished controller
// does once ttlSecondsAfterFinished has passed. That controller deletes with foreground
// propagation (the garbage collector then deletes the pods and the Job); no garbage collector
// runs here and the Job has no pods, so background propagation, to the same end: it is gone.
func deleteAsTTLController(ctx context.Context, t *testing.T, c client.Client, job *batchv1.Job) {
	t.Helper()
	if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID}); err != nil {
		t.Fatal(err)
	}
	if err := stack.Poll(waitTimeout, waitInterval, "Job "+job.Name+" deleted", func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
}

func jobAbsent(ctx context.Context, c client.Client, key client.ObjectKey) error {
	err := c.Get(ctx, key, &batchv1.Job{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("Job %s exists", key)
}

// rollOutDeployments writes, for each Deployment of the ManagedResource, the status the
// deployment controller writes when a rollout has completed. It stands in for
// kube-controller-manager and a node running the pods, neither of which this seed has.
func rollOutDeployments(ctx context.Context, t *testing.T, c client.Client, mr *resourcesv1alpha1.ManagedResource) {
	t.Helper()
	for _, ref := range mr.Status.Resources {
		if ref.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, d); err != nil {
			t.Fatal(err)
		}
		replicas := ptr.Deref(d.Spec.Replicas, 1)
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
					Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
					Message: fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.Name), LastUpdateTime: now, LastTransitionTime: now},
			},
		}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatalf("Deployment %s: %v", d.Name, err)
		}
	}
}

// installationWatch reads the installation as an operator does: the ManagedResource's
// conditions in the seed, the ControllerInstallation's in the garden.
type installationWatch struct {
	t            *testing.T
	seed         *seedAPI
	garden       client.Client
	gardenRest   *rest.Config
	mr           client.ObjectKey
	installation string
}

func (w *installationWatch) getMR() *resourcesv1alpha1.ManagedResource {
	w.t.Helper()
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := w.seed.client.Get(context.Background(), w.mr, mr); err != nil {
		w.t.Fatal(err)
	}
	return mr
}

func (w *installationWatch) eventually(what string, f func() error) {
	w.t.Helper()
	if err := stack.Poll(waitTimeout, 100*time.Millisecond, what, func() (bool, string, error) {
		if err := f(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		w.t.Fatal(err)
	}
}

// never fails if f returns an error within d: f states what must stay so.
func (w *installationWatch) never(what string, d time.Duration, f func() error) {
	w.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := f(); err != nil {
			w.t.Fatalf("%s: %v", what, err)
		}
	}
}

// expectMR waits until f accepts the ManagedResource and returns it.
func (w *installationWatch) expectMR(what string, f func(*resourcesv1alpha1.ManagedResource) error) *resourcesv1alpha1.ManagedResource {
	w.t.Helper()
	var mr *resourcesv1alpha1.ManagedResource
	w.eventually(what, func() (err error) {
		mr, err = w.operator().ManagedResource(context.Background(), f)
		return err
	})
	return mr
}

// expectInstallation waits until f accepts the ControllerInstallation.
func (w *installationWatch) expectInstallation(what string, f func(*gardencorev1beta1.ControllerInstallation) error) {
	w.t.Helper()
	w.eventually(what, func() error {
		_, err := w.operator().ControllerInstallation(context.Background(), f)
		return err
	})
}

// operator reads the installation as an operator does.
func (w *installationWatch) operator() stackgarden.Installation {
	return stackgarden.Installation{Name: w.installation, Seed: w.seed.client, Garden: w.garden}
}

// log logs both objects' conditions, with their messages.
func (w *installationWatch) log(when string) {
	w.t.Helper()
	ci := &gardencorev1beta1.ControllerInstallation{}
	if err := w.garden.Get(context.Background(), client.ObjectKey{Name: w.installation}, ci); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("%s: ManagedResource %s: %s", when, w.mr, stackgarden.DescribeConditions(w.getMR().Status.Conditions, true))
	w.t.Logf("%s: ControllerInstallation %s: %s", when, w.installation, stackgarden.DescribeConditions(ci.Status.Conditions, true))
}

// isSeedDashboard says obj is the dashboard ConfigMap the seed's Plutono picks up.
func isSeedDashboard(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "ConfigMap" && obj.GetLabels()[v1beta1constants.LabelPrefixMonitoringDashboard+string(component.ClusterTypeSeed)] == "true"
}

// checkInstalled checks what gardenlet's values and mutations make of the chart: the cluster is
// the seed's name, and every housekeeper container has gardenlet's SEED_NAME.
func checkInstalled(t *testing.T, obj *unstructured.Unstructured, seed string) {
	t.Helper()
	switch obj.GetKind() {
	case "ConfigMap":
		if cluster, _, _ := unstructured.NestedString(obj.Object, "data", "HOUSEKEEPER_CLUSTER"); cluster != seed {
			t.Errorf("ConfigMap %s: HOUSEKEEPER_CLUSTER=%q, want the seed's name %q", obj.GetName(), cluster, seed)
		}
	case "Deployment", "Job":
		cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			if !slices.ContainsFunc(env, func(e any) bool { return e.(map[string]any)["name"] == "SEED_NAME" }) {
				t.Errorf("%s %s: gardenlet did not inject SEED_NAME", obj.GetKind(), obj.GetName())
			}
		}
	}
}

// seedAPI is a seed's API server, as a client and its configuration, and the seed's
// gardener-resource-manager.
type seedAPI struct {
	client    client.Client
	cfg       *rest.Config
	grm       *grm.ResourceManager
	grmLog    logr.Logger
	gardenlet *stackgarden.Gardenlet
}

// startResourceManager starts the seed's gardener-resource-manager, stopping the one running.
func (s *seedAPI) startResourceManager(t *testing.T) {
	t.Helper()
	if s.grm != nil {
		if err := s.grm.Stop(); err != nil {
			t.Errorf("gardener-resource-manager: %v", err)
		}
	}
	rm, err := grm.Start(grm.Options{Source: s.cfg, Logger: s.grmLog})
	if err != nil {
		t.Fatal(err)
	}
	s.grm = rm
}

// registrationSeed is a seed for the installation alone: a kube-apiserver with the CRDs a seed
// has for what the chart deploys (ManagedResource, VPA, the Prometheus Operator's; not KEDA's,
// which testRegistration installs later), its garden namespace, and a Seed in the garden with
// its cluster identity. Its gardener-resource-manager runs with a seed's configuration (applying
// every hour, checking health every minute), and so does gardenlet's ControllerInstallation care
// controller (every 30 s); both act at once on the events they watch.
func registrationSeed(ctx context.Context, t *testing.T, g *garden, l *logs) (*gardencorev1beta1.Seed, *seedAPI) {
	t.Helper()
	const name = "registration"
	kube, err := stack.StartKube(l.file(t, name+"-kube-apiserver.log"))
	if err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.Stop() })
	if err := stackgarden.InstallSeedCRDs(kube.Config, stackgarden.ExtensionCRDs...); err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	c, err := client.New(kube.Config, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}); err != nil {
		t.Fatal(err)
	}
	seed := newSeed(name, "azure", "westeurope")
	if err := g.client.Create(ctx, seed); err != nil {
		t.Fatalf("creating Seed %s: %v", name, err)
	}
	seed.Status.ClusterIdentity = ptr.To("seed-" + name)
	if err := g.client.Status().Update(ctx, seed); err != nil {
		t.Fatal(err)
	}

	s := &seedAPI{client: c, cfg: kube.Config, grmLog: l.logger(t, name+"-gardener-resource-manager.log")}
	s.startResourceManager(t)
	t.Cleanup(func() {
		if err := s.grm.Stop(); err != nil {
			t.Errorf("gardener-resource-manager of seed %s: %v", name, err)
		}
	})

	// gardenlet's ControllerInstallation reconciler and care controller, as gardenlet adds them,
	// with their default configuration.
	gl, err := stackgarden.StartGardenlet(stackgarden.GardenletOptions{
		Garden: g.cfg, Seed: kube.Config, Logger: l.logger(t, name+"-gardenlet.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gl.Stop(); err != nil {
			t.Errorf("gardenlet %s: %v", name, err)
		}
	})
	s.gardenlet = gl
	return seed, s
}

// installKEDACRDs installs KEDA's CRDs, of the release test/keda/go.mod requires, from its Go
// module, as a seed that runs housekeeper in KEDA mode has them.
func installKEDACRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	const module = "github.com/kedacore/keda/v2"
	version, err := stack.RequiredVersion(filepath.Join("..", "keda", "go.mod"), module)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &mod); err != nil || jsonErr != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s %s", module, version, err, mod.Error, stderr.String())
	}
	dir := filepath.Join(mod.Dir, "config", "crd", "bases")
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: time.Minute}); err != nil {
		t.Fatalf("installing KEDA's CRDs from %s: %v", dir, err)
	}
}

// managedObjects are the objects of the ManagedResource garden/name in the seed, as
// gardener-resource-manager reads them from its secrets.
func managedObjects(ctx context.Context, t *testing.T, c client.Client, name string) []*unstructured.Unstructured {
	t.Helper()
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "garden", Name: name}, mr); err != nil {
		t.Fatalf("the installation's ManagedResource: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, ref := range mr.Spec.SecretRefs {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mr.Namespace, Name: ref.Name}, secret); err != nil {
			t.Fatal(err)
		}
		for key, data := range secret.Data {
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					t.Fatalf("ManagedResource secret %s, %s: %v", ref.Name, key, err)
				}
				if len(u.Object) > 0 {
					objs = append(objs, u)
				}
			}
		}
	}
	if len(objs) == 0 {
		t.Fatal("the installation's ManagedResource holds no objects")
	}
	return objs
}

// recordConditions records the object's conditions (stackgarden.RecordConditions) until Stop or
// the end of the test.
func recordConditions(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, list client.ObjectList, key client.ObjectKey, types ...gardencorev1beta1.ConditionType) *stackgarden.ConditionRecorder {
	t.Helper()
	r, err := stackgarden.RecordConditions(cfg, scheme, list, key, types...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}
