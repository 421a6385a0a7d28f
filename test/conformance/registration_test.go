package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	kubernetesfake "github.com/gardener/gardener/pkg/client/kubernetes/fake"
	"github.com/gardener/gardener/pkg/gardenlet/controller/controllerinstallation/controllerinstallation"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// registrationFile is housekeeper's ControllerRegistration and ControllerDeployment.
const registrationFile = "../../infra/gardener/controller-registration.yaml"

// housekeeper enters a landscape the Gardener way. gardener-apiserver accepts its
// ControllerRegistration beside a provider extension's that no longer claims the backup kinds
// (left out, or kept as non-primary), and refuses the provider's registration as shipped —
// primary for BackupBucket/azure too — with its own message. gardenlet's ControllerInstallation
// reconciler then installs housekeeper into a seed from its ControllerDeployment: it renders the
// chart with the seed's values into a ManagedResource, whose objects the seed's kube-apiserver
// takes for real, as gardener-resource-manager applies them.
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
	applied, skipped := map[string]int{}, map[string]int{}
	for _, obj := range objs {
		if obj.GetNamespace() != "" && obj.GetNamespace() != namespace {
			t.Errorf("%s %s: namespace %s, want the installation's %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), namespace)
		}
		err := seedClient.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("gardener-resource-manager"), client.ForceOwnership)
		switch {
		case err == nil:
			applied[obj.GetKind()]++
		case obj.GetKind() == "ScaledObject" && isNoMatch(err):
			skipped[obj.GetKind()]++ // KEDA's CRD is not in this seed; infra's dry run validates them
		default:
			t.Errorf("the seed refuses %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		checkInstalled(t, obj, seed.Name)
	}
	t.Logf("installed through the registration into %s: %v (not served by this seed: %v)", namespace, applied, skipped)
	for _, kind := range []string{"Deployment", "ConfigMap", "Job", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"PodDisruptionBudget", "NetworkPolicy", "ValidatingAdmissionPolicy", "CustomResourceDefinition", "PodMonitor",
		"PrometheusRule", "VerticalPodAutoscaler", "FlowSchema"} {
		if applied[kind] == 0 {
			t.Errorf("the installation applied no %s", kind)
		}
	}
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

// seedAPI is a seed's API server, as a client and its configuration.
type seedAPI struct {
	client client.Client
	cfg    *rest.Config
}

// registrationSeed is a seed for the installation alone: a kube-apiserver with the CRDs a seed
// has for what the chart deploys (ManagedResource, VPA, the Prometheus Operator's), its garden
// namespace, and a Seed in the garden with its cluster identity.
func registrationSeed(ctx context.Context, t *testing.T, g *garden, l *logs) (*gardencorev1beta1.Seed, seedAPI) {
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
	return seed, seedAPI{client: c, cfg: kube.Config}
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

func isNoMatch(err error) bool {
	return meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind")
}
