package infra_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	operatorv1alpha1 "github.com/gardener/gardener/pkg/apis/operator/v1alpha1"
	"github.com/gardener/gardener/pkg/utils/gardener/operator"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/release"
)

// gardenerExtension is infra/gardener/extension.yaml, decoded strictly into gardener-operator's
// Extension.
func gardenerExtension(t *testing.T) *operatorv1alpha1.Extension {
	t.Helper()
	data, err := os.ReadFile("gardener/extension.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ext, err := release.DecodeExtension(data)
	if err != nil {
		t.Fatalf("infra/gardener/extension.yaml: %v", err)
	}
	return ext
}

// The Extension is the registration for a landscape gardener-operator runs: the
// ControllerRegistration and ControllerDeployment gardener-operator writes from it into the
// virtual garden (gardener's own ControllerRegistrationForExtension) are the shipped ones —
// same names, resources, policy, chart and values — so the seeds get what
// controller-registration.yaml gives them, whichever the landscape applies. In the runtime
// cluster it serves the registered types, and only the garden class.
func TestExtensionIsTheRegistration(t *testing.T) {
	ext := gardenerExtension(t)
	reg, dep := registration(t)
	gotReg, gotDep := operator.ControllerRegistrationForExtension(ext)
	if gotReg.Name != reg.Name || gotDep.Name != dep.Name {
		t.Errorf("gardener-operator writes ControllerRegistration %s and ControllerDeployment %s, controller-registration.yaml has %s and %s",
			gotReg.Name, gotDep.Name, reg.Name, dep.Name)
	}
	if !reflect.DeepEqual(gotReg.Spec.Resources, reg.Spec.Resources) {
		t.Errorf("the Extension's resources %+v, the ControllerRegistration's %+v", gotReg.Spec.Resources, reg.Spec.Resources)
	}
	if !reflect.DeepEqual(gotReg.Spec.Deployment, reg.Spec.Deployment) {
		t.Errorf("the Extension's deployment %+v, the ControllerRegistration's %+v", gotReg.Spec.Deployment, reg.Spec.Deployment)
	}
	if !reflect.DeepEqual(gotDep.Helm.OCIRepository, dep.Helm.OCIRepository) {
		t.Errorf("the Extension's chart %s, the ControllerDeployment's %s", gotDep.Helm.OCIRepository.GetURL(), dep.Helm.OCIRepository.GetURL())
	}
	var got, want map[string]any
	if err := json.Unmarshal(gotDep.Helm.Values.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(dep.Helm.Values.Raw, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the Extension's values (the seeds')\n%v\nthe ControllerDeployment's\n%v", got, want)
	}

	// scripts/release builds the same (without importing gardener's package; it says why).
	relReg, relDep := release.ControllerRegistrationFor(ext)
	if !reflect.DeepEqual(relReg.Spec, gotReg.Spec) || !reflect.DeepEqual(relDep.Helm, gotDep.Helm) || relReg.Name != gotReg.Name || relDep.Name != gotDep.Name {
		t.Errorf("scripts/release's ControllerRegistrationFor\n%+v\n%+v\ngardener-operator's\n%+v\n%+v", relReg, relDep, gotReg, gotDep)
	}
	if got := operator.ExtensionRuntimeNamespaceName(ext.Name); got != release.RuntimeNamespace {
		t.Errorf("gardener-operator installs into %s, scripts/release renders into %s", got, release.RuntimeNamespace)
	}

	runtimeValues, err := release.RuntimeValues(ext)
	if err != nil {
		t.Fatal(err)
	}
	var registered []any
	for _, r := range ext.Spec.Resources {
		if (r.Kind == "BackupBucket" || r.Kind == "BackupEntry") && !slices.Contains(registered, any(r.Type)) {
			registered = append(registered, r.Type)
		}
	}
	if !reflect.DeepEqual(runtimeValues["types"], registered) {
		t.Errorf("runtimeClusterValues types %v, the Extension registers %v", runtimeValues["types"], registered)
	}
	if !reflect.DeepEqual(runtimeValues["classes"], []any{"garden"}) {
		t.Errorf("runtimeClusterValues classes %v, want [garden]: the runtime cluster's BackupBuckets and BackupEntries are the garden's", runtimeValues["classes"])
	}
}

// As gardener-operator installs it into the garden runtime cluster: runtimeClusterValues and
// what gardener-operator merges in (gardener.runtimeCluster; test/conformance's TestGardenRuntime
// renders with gardener-operator's own controller), into runtime-extension-housekeeper. Every
// reference holds, the cluster and types are the Extension's, only the garden class is served,
// every pod has gardener-operator's priority class (the seeds' gardener-system-900 does not exist
// there), Gardener's own NetworkPolicies are relied on as in a seed, the KEDA-scaled functions
// are not judged by the resource manager, and the garden's Prometheus selects the monitors.
func TestChartAsGardenerOperatorInstallsIt(t *testing.T) {
	ext := gardenerExtension(t)
	values, err := release.RuntimeValues(ext)
	if err != nil {
		t.Fatal(err)
	}
	ns := operator.ExtensionRuntimeNamespaceName(ext.Name)
	r, err := chart.Render(ns, values, kubeVersion(t))
	if err != nil {
		t.Fatalf("rendering the chart as gardener-operator does: %v", err)
	}
	var objs []manifest
	for _, u := range decodeYAMLBytes(t, "chart (runtime)", r.Manifest()) {
		objs = append(objs, manifest{source: "chart (runtime)", obj: u})
	}
	checkDeployable(t, objs, ns)

	byID := map[string]*unstructured.Unstructured{}
	for _, m := range objs {
		byID[identity(m.obj)] = m.obj
	}
	config := byID["ConfigMap/housekeeper-config"]
	if config == nil {
		t.Fatal("no ConfigMap housekeeper-config")
	}
	data, _, _ := unstructured.NestedStringMap(config.Object, "data")
	for key, want := range map[string]string{
		"HOUSEKEEPER_CLUSTER": values["cluster"].(string), "HOUSEKEEPER_TYPES": "azure", "HOUSEKEEPER_EXTENSION_CLASSES": "garden",
	} {
		if data[key] != want {
			t.Errorf("%s=%q, want %q", key, data[key], want)
		}
	}
	for _, id := range []string{"Deployment.apps/housekeeper-bridge", "Deployment.apps/housekeeper-bucket", "Deployment.apps/housekeeper-entry",
		"Deployment.apps/housekeeper-purge", "PodMonitor.monitoring.coreos.com/housekeeper", "PrometheusRule.monitoring.coreos.com/housekeeper"} {
		if byID[id] == nil {
			t.Errorf("does not render %s", id)
		}
	}
	for _, id := range []string{"Deployment.apps/housekeeper-schedule", "CustomResourceDefinition.apiextensions.k8s.io/etcdbackupconfigs.backup.housekeeper.dev",
		"NetworkPolicy.networking.k8s.io/housekeeper-to-dns"} {
		if byID[id] != nil {
			t.Errorf("renders %s", id)
		}
	}
	jobs := 0
	for _, m := range objs {
		if path := podSpecPath(m.obj); path != nil {
			if pc, _, _ := unstructured.NestedString(m.obj.Object, append(path, "priorityClassName")...); pc != release.RuntimePriorityClassName {
				t.Errorf("%s: priorityClassName %q, want gardener-operator's %s", m, pc, release.RuntimePriorityClassName)
			}
			if m.obj.GetKind() == "Job" {
				jobs++
			}
		}
		if m.obj.GetKind() == "Deployment" && m.obj.GetName() != "housekeeper-bridge" {
			if m.obj.GetAnnotations()["resources.gardener.cloud/skip-health-check"] != "true" {
				t.Errorf("%s: the resource manager judges a Deployment KEDA scales from zero", m)
			}
		}
		if strings.HasPrefix(m.obj.GetAPIVersion(), "monitoring.coreos.com/") && m.obj.GetLabels()["prometheus"] != "garden" {
			t.Errorf("%s: labels %v, the garden's Prometheus selects prometheus=garden", m, m.obj.GetLabels())
		}
	}
	if jobs != 1 {
		t.Errorf("%d setup Jobs", jobs)
	}

	// Without a cluster name gardener-operator gives none: the chart says where to set it.
	delete(values, "cluster")
	if _, err := chart.Render(ns, values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), "runtimeClusterValues") {
		t.Errorf("without a cluster name: %v, want the error naming the Extension's runtimeClusterValues", err)
	}
}
