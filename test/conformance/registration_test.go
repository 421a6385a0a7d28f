package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gardener/gardener/pkg/api/indexer"
	gardenletconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/gardenlet/v1alpha1"
	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	kubernetesfake "github.com/gardener/gardener/pkg/client/kubernetes/fake"
	"github.com/gardener/gardener/pkg/gardenlet/controller/controllerinstallation/care"
	"github.com/gardener/gardener/pkg/gardenlet/controller/controllerinstallation/controllerinstallation"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

// registrationFile is housekeeper's ControllerRegistration and ControllerDeployment.
const registrationFile = "../../infra/gardener/controller-registration.yaml"

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
	reg, dep := readRegistration(t)
	// No OCI registry here: the chart travels in the ControllerDeployment, as helm.rawChart.
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	dep.Helm.OCIRepository, dep.Helm.RawChart = nil, archive
	for _, obj := range []client.Object{dep, reg} {
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
	// gardenlet's own client set refuses a Kubernetes newer than this gardener knows; its holder
	// for tests takes the seed's real client and gardener's chart renderer as they are.
	seedVersion, err := discovery.NewDiscoveryClientForConfigOrDie(seedClient.cfg).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	seedSet := kubernetesfake.NewClientSetBuilder().WithClient(seedClient.client).WithRESTConfig(seedClient.cfg).
		WithChartRenderer(chartrenderer.NewWithServerVersion(seedVersion)).WithVersion(seedVersion.GitVersion).Build()
	r := &controllerinstallation.Reconciler{
		GardenClient: g.client, GardenConfig: g.cfg, SeedClientSet: seedSet, Clock: clock.RealClock{},
		Identity: &gardencorev1beta1.Gardener{Version: "v1.150.0"}, GardenClusterIdentity: "garden", GardenNamespace: "garden",
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: installation.Name}}); err != nil {
		t.Fatalf("gardenlet's ControllerInstallation reconciler: %v", err)
	}
	if err := g.client.Get(ctx, client.ObjectKeyFromObject(installation), installation); err != nil {
		t.Fatal(err)
	}
	valid := conditionOf(installation.Status.Conditions, gardencorev1beta1.ControllerInstallationValid)
	if valid == nil || valid.Status != gardencorev1beta1.ConditionTrue {
		t.Fatalf("ControllerInstallation Valid = %+v, want True (the chart rendered)", valid)
	}

	objs := managedObjects(ctx, t, seedClient.client, installation.Name)
	namespace := "extension-" + installation.Name
	for _, obj := range objs {
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
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionFalse, resourcesv1alpha1.ConditionApplyFailed, `no matches for kind "ScaledObject"`)
	})
	// gardenlet's care controller reads the ManagedResource's observed generation before its
	// conditions: a ManagedResource never applied in full says only that, not why.
	w.expectInstallation("the installation is not Installed without KEDA", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationInstalled, gardencorev1beta1.ConditionFalse, "InstallationPending",
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
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionTrue, resourcesv1alpha1.ConditionApplySucceeded, "All resources are applied.")
	})
	w.expectInstallation("the installation is Installed", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationInstalled, gardencorev1beta1.ConditionTrue, "InstallationSuccessful", "")
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
		if err := expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "DeploymentUnhealthy", "observed generation outdated (0/1)"); err != nil {
			return err
		}
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesProgressing, gardencorev1beta1.ConditionTrue, "DeploymentProgressing", "observed generation outdated (0/1)")
	})
	w.expectInstallation("the installation is not Healthy", func(ci *gardencorev1beta1.ControllerInstallation) error {
		// The care controller copies the ManagedResource's message, not its reason.
		if err := expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionFalse, "ControllerNotHealthy", "is unhealthy: observed generation outdated (0/1)"); err != nil {
			return err
		}
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationProgressing, gardencorev1beta1.ConditionTrue, "ControllerNotRolledOut", "")
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
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "DeploymentUnhealthy", "")
	})

	// 2. The Deployments roll out (standing in for kube-controller-manager and a node): the
	// health controller gets to the Job.
	rollOutDeployments(ctx, t, c, mr)
	w.expectMR("gardener-resource-manager reports the Job missing", func(mr *resourcesv1alpha1.ManagedResource) error {
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionFalse, "JobMissing", missing)
	})
	w.expectInstallation("the installation is not Healthy for the missing Job", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionFalse, "ControllerNotHealthy", missing)
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
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", "All resources are healthy.")
	})
	w.expectInstallation("the installation is Healthy", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionTrue, "ControllerHealthy", "")
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
		return expectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", "")
	})
	w.expectInstallation("the installation is Healthy again", func(ci *gardencorev1beta1.ControllerInstallation) error {
		return expectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionTrue, "ControllerHealthy", "")
	})
	mrStates, ciStates := mrSeen.stop(), ciSeen.stop()
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
	mr := &resourcesv1alpha1.ManagedResource{}
	w.eventually(what, func() error {
		if err := w.seed.client.Get(context.Background(), w.mr, mr); err != nil {
			return err
		}
		if err := f(mr); err != nil {
			return fmt.Errorf("%v (conditions: %s)", err, describeConditions(mr.Status.Conditions, true))
		}
		return nil
	})
	return mr
}

// expectInstallation waits until f accepts the ControllerInstallation.
func (w *installationWatch) expectInstallation(what string, f func(*gardencorev1beta1.ControllerInstallation) error) {
	w.t.Helper()
	w.eventually(what, func() error {
		ci := &gardencorev1beta1.ControllerInstallation{}
		if err := w.garden.Get(context.Background(), client.ObjectKey{Name: w.installation}, ci); err != nil {
			return err
		}
		if err := f(ci); err != nil {
			return fmt.Errorf("%v (conditions: %s)", err, describeConditions(ci.Status.Conditions, true))
		}
		return nil
	})
}

// log logs both objects' conditions, with their messages.
func (w *installationWatch) log(when string) {
	w.t.Helper()
	ci := &gardencorev1beta1.ControllerInstallation{}
	if err := w.garden.Get(context.Background(), client.ObjectKey{Name: w.installation}, ci); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("%s: ManagedResource %s: %s", when, w.mr, describeConditions(w.getMR().Status.Conditions, true))
	w.t.Logf("%s: ControllerInstallation %s: %s", when, w.installation, describeConditions(ci.Status.Conditions, true))
}

// expectCondition checks a condition's status and reason, and that its message contains
// message.
func expectCondition(conditions []gardencorev1beta1.Condition, typ gardencorev1beta1.ConditionType, status gardencorev1beta1.ConditionStatus, reason, message string) error {
	c := conditionOf(conditions, typ)
	if c == nil {
		return fmt.Errorf("no condition %s", typ)
	}
	if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, message) {
		return fmt.Errorf("%s=%s/%s %q, want %s/%s containing %q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
	return nil
}

// describeConditions is "Type=Status/Reason" for each condition, with the message if asked.
func describeConditions(conditions []gardencorev1beta1.Condition, messages bool, only ...gardencorev1beta1.ConditionType) string {
	var out []string
	for _, c := range conditions {
		if len(only) > 0 && !slices.Contains(only, c.Type) {
			continue
		}
		s := fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason)
		if messages {
			s += fmt.Sprintf(" %q", c.Message)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// conditionRecorder records every distinct state of an object's conditions that a watch
// delivers: states that last only milliseconds too.
type conditionRecorder struct {
	mu     sync.Mutex
	seen   []string
	cancel context.CancelFunc
	done   chan struct{}
}

func recordConditions(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, list client.ObjectList, key client.ObjectKey, types ...gardencorev1beta1.ConditionType) *conditionRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := []client.ListOption{client.MatchingFields{"metadata.name": key.Name}}
	if key.Namespace != "" {
		opts = append(opts, client.InNamespace(key.Namespace))
	}
	watcher, err := wc.Watch(ctx, list, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &conditionRecorder{cancel: func() { watcher.Stop(); cancel() }, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range watcher.ResultChan() {
			var conditions []gardencorev1beta1.Condition
			switch o := ev.Object.(type) {
			case *resourcesv1alpha1.ManagedResource:
				conditions = o.Status.Conditions
			case *gardencorev1beta1.ControllerInstallation:
				conditions = o.Status.Conditions
			default:
				continue
			}
			s := describeConditions(conditions, false, types...)
			r.mu.Lock()
			if len(r.seen) == 0 || r.seen[len(r.seen)-1] != s {
				r.seen = append(r.seen, s)
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop ends the watch and returns the states seen, in order.
func (r *conditionRecorder) stop() []string {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
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
	client client.Client
	cfg    *rest.Config
	grm    *grm.ResourceManager
	grmLog logr.Logger
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
	crds := filepath.Join(gardenerModuleDir(t), "example", "seed-crds")
	var paths []string
	for _, f := range []string{"resources.gardener.cloud_managedresources", "autoscaling.k8s.io_verticalpodautoscalers",
		"monitoring.coreos.com_podmonitors", "monitoring.coreos.com_prometheusrules"} {
		paths = append(paths, filepath.Join(crds, "10-crd-"+f+".yaml"))
	}
	if _, err := envtest.InstallCRDs(kube.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: time.Minute}); err != nil {
		t.Fatalf("seed %s: installing %v: %v", name, paths, err)
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

	// gardenlet's ControllerInstallation care controller, as gardenlet adds it
	// (pkg/gardenlet/controller/controllerinstallation.AddToManager), with its default
	// configuration.
	log := l.logger(t, name+"-gardenlet.log")
	mgr, err := manager.New(kube.Config, manager.Options{
		Scheme:                 kubernetes.SeedScheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	gardenCluster, err := cluster.New(g.cfg, func(o *cluster.Options) {
		o.Scheme = kubernetes.GardenScheme
		o.Logger = log
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(gardenCluster); err != nil {
		t.Fatal(err)
	}
	if err := indexer.AddControllerInstallationRegistrationRefName(ctx, gardenCluster.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if err := (&care.Reconciler{
		Config: gardenletconfigv1alpha1.ControllerInstallationCareControllerConfiguration{
			ConcurrentSyncs: ptr.To(gardenletconfigv1alpha1.DefaultControllerConcurrentSyncs), SyncPeriod: &metav1.Duration{Duration: 30 * time.Second},
		},
		ManagedResourceNamespace: v1beta1constants.GardenNamespace,
	}).AddToManager(mgr, gardenCluster, mgr); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr, "gardenlet "+name)
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

// readRegistration decodes infra/gardener/controller-registration.yaml with the garden's scheme.
func readRegistration(t *testing.T) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	t.Helper()
	data, err := os.ReadFile(registrationFile)
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(kubernetes.GardenScheme).UniversalDeserializer()
	var reg *gardencorev1beta1.ControllerRegistration
	var dep *gardencorev1.ControllerDeployment
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", registrationFile, err)
		}
		switch o := obj.(type) {
		case *gardencorev1beta1.ControllerRegistration:
			reg = o
		case *gardencorev1.ControllerDeployment:
			dep = o
		default:
			t.Fatalf("%s: unexpected %T", registrationFile, obj)
		}
	}
	if reg == nil || dep == nil || dep.Helm == nil {
		t.Fatalf("%s lacks the registration or the deployment's helm section", registrationFile)
	}
	return reg, dep
}

func conditionOf(conditions []gardencorev1beta1.Condition, t gardencorev1beta1.ConditionType) *gardencorev1beta1.Condition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}
