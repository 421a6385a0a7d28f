package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	operatorconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/operator/v1alpha1"
	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	operatorv1alpha1 "github.com/gardener/gardener/pkg/apis/operator/v1alpha1"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	fakeclientmap "github.com/gardener/gardener/pkg/client/kubernetes/clientmap/fake"
	clientmapkeys "github.com/gardener/gardener/pkg/client/kubernetes/clientmap/keys"
	kubernetesfake "github.com/gardener/gardener/pkg/client/kubernetes/fake"
	operatorclient "github.com/gardener/gardener/pkg/operator/client"
	extensioncare "github.com/gardener/gardener/pkg/operator/controller/extension/care"
	operatorextension "github.com/gardener/gardener/pkg/operator/controller/extension/extension"
	requiredruntime "github.com/gardener/gardener/pkg/operator/controller/extension/required/runtime"
	"github.com/gardener/gardener/pkg/utils/managedresources"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/release"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	stackgarden "github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

// housekeeper enters the garden runtime cluster the way gardener-operator installs extensions:
// from infra/gardener/extension.yaml, with gardener-operator's own Extension controllers of the
// gardener module — the required-runtime reconciler (is the extension needed for the Garden?),
// the main reconciler (pull the chart from its OCI repository, render it with the
// runtimeClusterValues and what gardener-operator adds, into a ManagedResource, and write the
// ControllerRegistration and ControllerDeployment for the virtual garden) and the care
// reconciler (the ManagedResource's health as the Extension's RuntimeHealthy). The runtime
// cluster is a kube-apiserver with the CRDs gardener-operator's runtime has; its
// gardener-resource-manager (scripts/stack/grm, a seed's: gardener-operator's applies the same
// class) applies the ManagedResource; the chart is served by an OCI registry on loopback.
//
// Left out: gardener-apiserver and the virtual garden. gardener-operator's ManagedResource for
// the virtual garden's ControllerRegistration and ControllerDeployment is read, not applied; the
// care reconciler is called, not run by a manager (its manager would watch the virtual garden's
// ControllerInstallations); no admission is deployed (the Extension has none). No node: the
// Deployments' rollout is written as kube-controller-manager would (rollOutDeployments).
func TestGardenRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver, gardener-resource-manager and gardener-operator's Extension controllers")
	}
	start := time.Now()
	routeLibraryLogs()
	l := newLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	kube, err := stack.StartKube(l.file(t, "runtime-kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Stop() })
	// What gardener-operator's runtime has for this: its own CRDs, the ManagedResource, the
	// extension kinds its required-runtime reconciler watches (BackupBucket and BackupEntry come
	// with StartKube), and what the chart deploys (VPA, the Prometheus Operator's, KEDA's).
	if err := stackgarden.InstallSeedCRDs(kube.Config, append(stackgarden.ExtensionCRDs,
		"extensions.gardener.cloud_dnsrecords", "extensions.gardener.cloud_extensions")...); err != nil {
		t.Fatal(err)
	}
	operatorCRDs := filepath.Join(gardenerModuleDir(t), "example", "operator")
	if _, err := envtest.InstallCRDs(kube.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true, MaxTime: time.Minute, Paths: []string{
		filepath.Join(operatorCRDs, "10-crd-operator.gardener.cloud_gardens.yaml"), filepath.Join(operatorCRDs, "10-crd-operator.gardener.cloud_extensions.yaml"),
	}}); err != nil {
		t.Fatal(err)
	}
	installKEDACRDs(t, kube.Config)
	c, err := client.New(kube.Config, client.Options{Scheme: operatorclient.RuntimeScheme})
	if err != nil {
		t.Fatal(err)
	}
	// What gardener-operator's Garden controller creates before extensions are installed.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1beta1constants.GardenNamespace}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: release.RuntimePriorityClassName}, Value: 999998200},
		// The operator's: the NATS identities the Extension references (deployment.resources).
		stackgarden.PlaceholderNATSIdentities(hkcli.WorkloadIdentities()),
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("runtime cluster up in %s", time.Since(start).Round(time.Millisecond))

	ext := runtimeExtension(ctx, t)
	if err := c.Create(ctx, ext); err != nil {
		t.Fatalf("the runtime cluster refuses infra/gardener/extension.yaml: %v", err)
	}

	rm, err := grm.Start(grm.Options{Source: kube.Config, Logger: l.logger(t, "runtime-gardener-resource-manager.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rm.Stop(); err != nil {
			t.Errorf("gardener-resource-manager: %v", err)
		}
	})
	startOperator(t, kube.Config, l)
	care := &extensioncare.Reconciler{RuntimeClient: c, Config: operatorConfig(), Clock: clock.RealClock{}, GardenNamespace: v1beta1constants.GardenNamespace}

	extKey := client.ObjectKeyFromObject(ext)
	expectExtension := func(what string, check func(*operatorv1alpha1.Extension) error) *operatorv1alpha1.Extension {
		t.Helper()
		got := &operatorv1alpha1.Extension{}
		err := stack.Poll(2*time.Minute, 200*time.Millisecond, what, func() (bool, string, error) {
			if _, err := care.Reconcile(ctx, reconcile.Request{NamespacedName: extKey}); err != nil {
				return false, err.Error(), nil
			}
			if err := c.Get(ctx, extKey, got); err != nil {
				return false, err.Error(), nil
			}
			if err := check(got); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s): %s", what, time.Since(start).Round(time.Millisecond), stackgarden.DescribeConditions(got.Status.Conditions, false))
		return got
	}

	// No Garden: not required, nothing installed.
	expectExtension("without a Garden the Extension is neither required nor installed", func(e *operatorv1alpha1.Extension) error {
		if err := stackgarden.ExpectCondition(e.Status.Conditions, operatorv1alpha1.ExtensionRequiredRuntime, gardencorev1beta1.ConditionFalse, "ExtensionNotRequired", ""); err != nil {
			return err
		}
		return stackgarden.ExpectCondition(e.Status.Conditions, operatorv1alpha1.ExtensionInstalled, gardencorev1beta1.ConditionFalse, operatorextension.ReasonNoGardenFound, "")
	})

	// A Garden whose virtual garden's etcd is backed up to azure, reconciled.
	garden := newGarden()
	if err := c.Create(ctx, garden); err != nil {
		t.Fatalf("creating the Garden: %v", err)
	}
	garden.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeReconcile, State: gardencorev1beta1.LastOperationStateSucceeded,
		Progress: 100, LastUpdateTime: metav1.Now()}
	if err := c.Status().Update(ctx, garden); err != nil {
		t.Fatal(err)
	}
	expectExtension("the Garden's etcd backups require housekeeper in the runtime cluster", func(e *operatorv1alpha1.Extension) error {
		return stackgarden.ExpectCondition(e.Status.Conditions, operatorv1alpha1.ExtensionRequiredRuntime, gardencorev1beta1.ConditionTrue, "ExtensionRequired",
			"Extension required for kinds [BackupBucket BackupEntry]")
	})

	// gardener-operator renders the chart into its ManagedResource.
	mrKey := client.ObjectKey{Namespace: v1beta1constants.GardenNamespace, Name: "extension-" + ext.Name + "-garden"}
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := stack.Poll(time.Minute, 200*time.Millisecond, "gardener-operator's ManagedResource "+mrKey.String(), func() (bool, string, error) {
		err := c.Get(ctx, mrKey, mr)
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	if class := ptr.Deref(mr.Spec.Class, ""); class != grm.SeedClass {
		t.Errorf("the ManagedResource's class %q, want %q (the runtime cluster's resource manager)", class, grm.SeedClass)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: release.RuntimeNamespace}, ns); err != nil {
		t.Fatalf("gardener-operator's namespace for the extension: %v", err)
	}
	if role := ns.Labels[v1beta1constants.GardenRole]; role != v1beta1constants.GardenRoleExtension {
		t.Errorf("namespace %s: %s=%q, want %s (Gardener's NetworkPolicies, which the chart relies on, select it)", ns.Name, v1beta1constants.GardenRole, role, v1beta1constants.GardenRoleExtension)
	}
	objs := managedObjects(ctx, t, c, mrKey.Name)
	checkRuntimeObjects(t, objs, ext)

	// gardener-resource-manager applies it; the Deployments roll out: gardener-operator's wait
	// for a healthy ManagedResource ends, and the Extension is Installed and RuntimeHealthy.
	waitMR := func(what string, check func(*resourcesv1alpha1.ManagedResource) error) {
		t.Helper()
		if err := stack.Poll(2*time.Minute, 200*time.Millisecond, what, func() (bool, string, error) {
			if err := c.Get(ctx, mrKey, mr); err != nil {
				return false, err.Error(), nil
			}
			if err := check(mr); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s)", what, time.Since(start).Round(time.Millisecond))
	}
	waitMR("gardener-resource-manager applies every object", func(mr *resourcesv1alpha1.ManagedResource) error {
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionTrue, resourcesv1alpha1.ConditionApplySucceeded, "")
	})
	if len(mr.Status.Resources) != len(objs) {
		t.Errorf("gardener-resource-manager lists %d objects, the ManagedResource holds %d", len(mr.Status.Resources), len(objs))
	}
	installed := expectExtension("not RuntimeHealthy while the Deployments are not rolled out", func(e *operatorv1alpha1.Extension) error {
		if cond := stackgarden.ConditionOf(e.Status.Conditions, operatorv1alpha1.ExtensionHealthy); cond == nil || cond.Status == gardencorev1beta1.ConditionTrue {
			return fmt.Errorf("RuntimeHealthy %+v", cond)
		}
		return nil
	})
	if cond := stackgarden.ConditionOf(installed.Status.Conditions, operatorv1alpha1.ExtensionInstalled); cond != nil && cond.Status == gardencorev1beta1.ConditionTrue {
		t.Errorf("Installed=True before the ManagedResource is healthy: %+v", cond)
	}
	startPods(ctx, t, c, mr)
	rollOutDeployments(ctx, t, c, mr)
	waitMR("gardener-resource-manager finds everything healthy", func(mr *resourcesv1alpha1.ManagedResource) error {
		if err := stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", ""); err != nil {
			return err
		}
		return stackgarden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesProgressing, gardencorev1beta1.ConditionFalse, "ResourcesRolledOut", "")
	})
	expectExtension("the Extension is Installed and RuntimeHealthy", func(e *operatorv1alpha1.Extension) error {
		if err := stackgarden.ExpectCondition(e.Status.Conditions, operatorv1alpha1.ExtensionInstalled, gardencorev1beta1.ConditionTrue, operatorextension.ReasonReconcileSuccess, ""); err != nil {
			return err
		}
		return stackgarden.ExpectCondition(e.Status.Conditions, operatorv1alpha1.ExtensionHealthy, gardencorev1beta1.ConditionTrue, "ExtensionComponentsRunning", "")
	})

	// What gardener-operator writes for the virtual garden: the seeds' registration, the same
	// as controller-registration.yaml.
	checkVirtualRegistration(ctx, t, c, ext.Name)
	t.Logf("TestGardenRuntime took %s", time.Since(start).Round(time.Millisecond))
}

// runtimeExtension is infra/gardener/extension.yaml, decoded strictly, with its chart pushed to
// an OCI registry on loopback (as `helm push` and make release push it) and referenced there by
// tag and digest: gardener-operator pulls it with its own registry client.
func runtimeExtension(ctx context.Context, t *testing.T) *operatorv1alpha1.Extension {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", release.ExtensionFile))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := release.DecodeExtension(data)
	if err != nil {
		t.Fatalf("%s: %v", release.ExtensionFile, err)
	}
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(server.Close)
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	created, err := images.Epoch()
	if err != nil {
		t.Fatal(err)
	}
	artifact, meta, err := release.HelmChart(archive, created)
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.TrimPrefix(server.URL, "http://") + "/charts/" + chart.Name + ":" + meta.Version
	ref, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, artifact, remote.WithContext(ctx)); err != nil {
		t.Fatalf("pushing the chart to %s: %v", tag, err)
	}
	digest, err := artifact.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ext.Spec.Deployment.ExtensionDeployment.Helm.OCIRepository = &gardencorev1.OCIRepository{Ref: ptr.To(tag + "@" + digest.String())}
	return ext
}

// startPods creates the pods of every Deployment of the ManagedResource that
// gardener-resource-manager judges, as their ReplicaSets would (no node runs them): its
// progressing check counts a Deployment's pods, and gardener-operator waits until the
// ManagedResource is no longer progressing. The KEDA-scaled functions are not judged
// (resources.gardener.cloud/skip-health-check).
func startPods(ctx context.Context, t *testing.T, c client.Client, mr *resourcesv1alpha1.ManagedResource) {
	t.Helper()
	for _, ref := range mr.Status.Resources {
		if ref.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, d); err != nil {
			t.Fatal(err)
		}
		if d.Annotations[resourcesv1alpha1.SkipHealthCheck] == "true" {
			continue
		}
		for i := range ptr.Deref(d.Spec.Replicas, 1) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", d.Name, i), Namespace: d.Namespace,
				Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations}, Spec: *d.Spec.Template.Spec.DeepCopy()}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatalf("a pod of Deployment %s: %v", d.Name, err)
			}
		}
	}
}

// operatorConfig is gardener-operator's configuration as it defaults it.
func operatorConfig() operatorconfigv1alpha1.OperatorConfiguration {
	var config operatorconfigv1alpha1.OperatorConfiguration
	operatorconfigv1alpha1.SetObjectDefaults_OperatorConfiguration(&config)
	return config
}

// startOperator runs gardener-operator's Extension main and required-runtime reconcilers in a
// manager on the runtime cluster, configured as gardener-operator defaults them, until the end of
// the test.
func startOperator(t *testing.T, cfg *rest.Config, l *logs) {
	t.Helper()
	config := operatorConfig()
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 operatorclient.RuntimeScheme,
		Logger:                 l.logger(t, "runtime-gardener-operator.log"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// gardener-operator's own client set refuses a Kubernetes newer than this gardener knows;
	// gardener's holder for tests takes the manager's client and gardener's chart renderer as
	// they are (scripts/stack/garden does the same for gardenlet).
	serverVersion, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	clientSet := kubernetesfake.NewClientSetBuilder().WithClient(mgr.GetClient()).WithAPIReader(mgr.GetAPIReader()).WithCache(mgr.GetCache()).
		WithRESTConfig(cfg).WithChartRenderer(chartrenderer.NewWithServerVersion(serverVersion)).WithVersion(serverVersion.GitVersion).Build()
	// The virtual garden's client set is needed only for an admission, which the Extension has not.
	gardenClientMap := fakeclientmap.NewClientMapBuilder().WithClientSetForKey(clientmapkeys.ForGarden(newGarden()), clientSet).Build()
	if err := (&operatorextension.Reconciler{Config: config, RuntimeClientSet: clientSet, GardenClientMap: gardenClientMap,
		GardenNamespace: v1beta1constants.GardenNamespace}).AddToManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&requiredruntime.Reconciler{Config: config.Controllers.ExtensionRequiredRuntime}).AddToManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gardener-operator's controllers: %v", err)
		}
	})
}

// newGarden is a Garden whose virtual garden's etcd is backed up to azure: gardener-operator
// then needs the azure BackupBucket and BackupEntry in the runtime cluster (class garden).
func newGarden() *operatorv1alpha1.Garden {
	return &operatorv1alpha1.Garden{
		ObjectMeta: metav1.ObjectMeta{Name: "garden", Annotations: map[string]string{v1beta1constants.AnnotationKeyGenericTokenKubeconfigSecretName: "generic-token-kubeconfig"}},
		Spec: operatorv1alpha1.GardenSpec{
			RuntimeCluster: operatorv1alpha1.RuntimeCluster{
				Ingress:    operatorv1alpha1.Ingress{Controller: gardencorev1beta1.IngressController{Kind: "nginx"}, Domains: []operatorv1alpha1.DNSDomain{{Name: "runtime.garden.housekeeper.test"}}},
				Networking: operatorv1alpha1.RuntimeNetworking{Pods: []string{"10.1.0.0/16"}, Services: []string{"10.2.0.0/16"}},
				Provider:   operatorv1alpha1.Provider{Zones: []string{"1"}},
			},
			VirtualCluster: operatorv1alpha1.VirtualCluster{
				DNS:         operatorv1alpha1.DNS{Domains: []operatorv1alpha1.DNSDomain{{Name: "virtual.garden.housekeeper.test"}}},
				Gardener:    operatorv1alpha1.Gardener{ClusterIdentity: "garden"},
				Kubernetes:  operatorv1alpha1.Kubernetes{Version: "1.33.0"},
				Maintenance: operatorv1alpha1.Maintenance{TimeWindow: gardencorev1beta1.MaintenanceTimeWindow{Begin: "220000+0100", End: "230000+0100"}},
				Networking:  operatorv1alpha1.Networking{Services: []string{"100.64.0.0/13"}},
				ETCD: &operatorv1alpha1.ETCD{Main: &operatorv1alpha1.ETCDMain{Backup: &operatorv1alpha1.Backup{
					Provider: "azure", BucketName: ptr.To("garden-etcd"), SecretRef: corev1.LocalObjectReference{Name: "virtual-garden-etcd-main-backup"},
				}}},
			},
		},
	}
}

// checkRuntimeObjects checks the objects gardener-operator rendered housekeeper's chart into:
// all in its namespace for the extension, with the Extension's runtimeClusterValues (the
// cluster, its types, only the garden class) and gardener-operator's priority class on every pod.
func checkRuntimeObjects(t *testing.T, objs []*unstructured.Unstructured, ext *operatorv1alpha1.Extension) {
	t.Helper()
	var values map[string]any
	if err := json.Unmarshal(ext.Spec.Deployment.ExtensionDeployment.RuntimeClusterValues.Raw, &values); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	pods := 0
	for _, obj := range objs {
		kinds[obj.GetKind()]++
		if obj.GetNamespace() != "" && obj.GetNamespace() != release.RuntimeNamespace {
			t.Errorf("%s %s: namespace %s, want gardener-operator's %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), release.RuntimeNamespace)
		}
		if obj.GetKind() == "ConfigMap" && obj.GetName() == "housekeeper-config" {
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			want := map[string]string{"HOUSEKEEPER_CLUSTER": values["cluster"].(string), "HOUSEKEEPER_TYPES": "azure", "HOUSEKEEPER_EXTENSION_CLASSES": "garden"}
			for k, v := range want {
				if data[k] != v {
					t.Errorf("ConfigMap housekeeper-config: %s=%q, want %q", k, data[k], v)
				}
			}
		}
		var spec []string
		switch obj.GetKind() {
		case "Deployment", "Job":
			spec = []string{"spec", "template", "spec"}
		default:
			continue
		}
		pods++
		if pc, _, _ := unstructured.NestedString(obj.Object, append(spec, "priorityClassName")...); pc != release.RuntimePriorityClassName {
			t.Errorf("%s %s: priorityClassName %q, want %s, which gardener-operator gives (gardener.runtimeCluster.priorityClassName)", obj.GetKind(), obj.GetName(), pc, release.RuntimePriorityClassName)
		}
	}
	for _, kind := range []string{"Deployment", "Job", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ScaledObject", "PodMonitor", "PrometheusRule", "VerticalPodAutoscaler"} {
		if kinds[kind] == 0 {
			t.Errorf("gardener-operator's rendering has no %s", kind)
		}
	}
	t.Logf("gardener-operator rendered %d objects (%d workloads) into %s: %v", len(objs), pods, release.RuntimeNamespace, kinds)
}

// checkVirtualRegistration reads the ManagedResource gardener-operator writes for the virtual
// garden (applied there by the virtual garden's resource manager, not run here): the
// ControllerRegistration and ControllerDeployment the seeds install housekeeper from, the same as
// infra/gardener/controller-registration.yaml (resources, policy, chart values).
func checkVirtualRegistration(ctx context.Context, t *testing.T, c client.Client, extension string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", release.RegistrationFile))
	if err != nil {
		t.Fatal(err)
	}
	wantReg, wantDep, err := release.DecodeRegistration(data)
	if err != nil {
		t.Fatal(err)
	}
	var wantValues map[string]any
	if err := json.Unmarshal(wantDep.Helm.Values.Raw, &wantValues); err != nil {
		t.Fatal(err)
	}
	// As the resource manager reads it (brotli-compressed here), with the garden's scheme.
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: v1beta1constants.GardenNamespace, Name: "extension-registration-" + extension}, mr); err != nil {
		t.Fatalf("gardener-operator's ManagedResource for the virtual garden: %v", err)
	}
	found := 0
	for _, ref := range mr.Spec.SecretRefs {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mr.Namespace, Name: ref.Name}, secret); err != nil {
			t.Fatal(err)
		}
		objs, err := managedresources.ExtractObjectsFromSecret(kubernetes.GardenCodec.UniversalDeserializer(), secret)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			switch o := obj.(type) {
			case *gardencorev1beta1.ControllerRegistration:
				found++
				if o.Name != wantReg.Name || !reflect.DeepEqual(o.Spec, wantReg.Spec) {
					t.Errorf("gardener-operator's ControllerRegistration %s:\n%+v\ncontroller-registration.yaml's %s:\n%+v", o.Name, o.Spec, wantReg.Name, wantReg.Spec)
				}
			case *gardencorev1.ControllerDeployment:
				found++
				var values map[string]any
				if err := json.Unmarshal(o.Helm.Values.Raw, &values); err != nil {
					t.Fatal(err)
				}
				if o.Name != wantDep.Name || !reflect.DeepEqual(values, wantValues) {
					t.Errorf("gardener-operator's ControllerDeployment %s: values %v, controller-registration.yaml's %s: %v", o.Name, values, wantDep.Name, wantValues)
				}
			}
		}
	}
	if found != 2 {
		t.Errorf("gardener-operator's ManagedResource for the virtual garden holds %d of the ControllerRegistration and ControllerDeployment", found)
	}
}
