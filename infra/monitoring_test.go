package infra_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	"github.com/gardener/gardener/pkg/component"
	seedprometheus "github.com/gardener/gardener/pkg/component/observability/monitoring/prometheus/seed"
	monitoringutils "github.com/gardener/gardener/pkg/component/observability/monitoring/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Installed by gardenlet, the chart's monitoring is what a seed's monitoring loads, by gardener
// v1.150's own constants: the PodMonitor and the PrometheusRule carry the labels the seed
// Prometheus selects them by (monitoringutils.Labels of the seed Prometheus, whose selectors
// take every namespace), the dashboard is a ConfigMap in the garden namespace labelled as the
// seed Plutono's dashboard refresher watches (LabelPrefixMonitoringDashboard + the seed cluster
// type), defaulting to the data source Plutono names after the seed Prometheus, and the seed's
// central "extensions" PodMonitor, which scrapes annotated pods in extension namespaces, leaves
// the pods alone (the PodMonitor scrapes them; twice would double every sum). Installed by hand
// without gardener, none of gardener's labels and no dashboard ConfigMap.
func TestMonitoringAsTheSeedSelectsIt(t *testing.T) {
	ns, _ := variant(t, "gardener")
	byID := map[string]*unstructured.Unstructured{}
	var pods []*unstructured.Unstructured
	for _, m := range render(t, "gardener") {
		byID[identity(m.obj)] = m.obj
		if m.obj.GetKind() == "Deployment" || m.obj.GetKind() == "Job" {
			pods = append(pods, m.obj)
		}
	}
	selected := monitoringutils.Labels(seedprometheus.Label)
	for _, id := range []string{"PodMonitor.monitoring.coreos.com/housekeeper", "PrometheusRule.monitoring.coreos.com/housekeeper"} {
		obj := byID[id]
		if obj == nil {
			t.Fatalf("no %s", id)
		}
		for k, v := range selected {
			if obj.GetLabels()[k] != v {
				t.Errorf("%s: labels %v, the seed Prometheus selects %v", id, obj.GetLabels(), selected)
			}
		}
	}

	// Every pod is the PodMonitor's, and none the seed's "extensions" PodMonitor's.
	podMonitor := byID["PodMonitor.monitoring.coreos.com/housekeeper"]
	match, _, _ := unstructured.NestedStringMap(podMonitor.Object, "spec", "selector", "matchLabels")
	keep := extensionsKeep(t)
	for _, obj := range pods {
		labels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
		annotations, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
		if obj.GetKind() == "Deployment" && !isSubset(match, labels) {
			t.Errorf("%s/%s: pod labels %v, the PodMonitor selects %v", obj.GetKind(), obj.GetName(), labels, match)
		}
		if keep(map[string]string{
			"__meta_kubernetes_namespace":                           ns,
			"__meta_kubernetes_pod_annotation_prometheus_io_scrape": annotations["prometheus.io/scrape"],
			"__meta_kubernetes_pod_annotation_prometheus_io_port":   annotations["prometheus.io/port"],
		}) {
			t.Errorf("%s/%s: the seed's extensions PodMonitor scrapes its pods too (annotations %v)", obj.GetKind(), obj.GetName(), annotations)
		}
	}

	dashboardLabel := v1beta1constants.LabelPrefixMonitoringDashboard + string(component.ClusterTypeSeed)
	var dashboards []*unstructured.Unstructured
	for _, obj := range byID {
		if obj.GetKind() == "ConfigMap" && obj.GetLabels()[dashboardLabel] == "true" {
			dashboards = append(dashboards, obj)
		}
	}
	if len(dashboards) != 1 {
		t.Fatalf("%d ConfigMaps labelled %s=true, want the dashboard's", len(dashboards), dashboardLabel)
	}
	cm := dashboards[0]
	if cm.GetNamespace() != v1beta1constants.GardenNamespace {
		t.Errorf("the dashboard ConfigMap is in %q; the seed Plutono's refresher watches %q", cm.GetNamespace(), v1beta1constants.GardenNamespace)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	shipped, err := os.ReadFile("chart/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || strings.TrimSpace(data["housekeeper.json"]) != strings.TrimSpace(string(shipped)) {
		t.Errorf("the dashboard ConfigMap's data is not chart/files/dashboard.json as housekeeper.json: keys %v", slicesOfKeys(data))
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name    string
				Current struct{ Value string }
			}
		}
	}
	if err := json.Unmarshal(shipped, &dash); err != nil {
		t.Fatal(err)
	}
	// gardener's plutono.go names the seed Prometheus's data source prometheus-<its name>.
	for _, v := range dash.Templating.List {
		if v.Name == "datasource" && v.Current.Value != "prometheus-"+seedprometheus.Label {
			t.Errorf("the dashboard's data source defaults to %q, the seed Plutono's is prometheus-%s", v.Current.Value, seedprometheus.Label)
		}
	}

	// By hand, with the Prometheus Operator: the monitors, no gardener label, no dashboard.
	for _, m := range render(t, "keda") {
		if _, ok := m.obj.GetLabels()["prometheus"]; ok {
			t.Errorf("%s without gardener: labels %v", m, m.obj.GetLabels())
		}
		if m.obj.GetLabels()[dashboardLabel] != "" {
			t.Errorf("%s without gardener: a seed dashboard", m)
		}
	}
}

// extensionsKeep is the keep rule of the seed Prometheus's central "extensions" PodMonitor
// (gardener's seed.CentralPodMonitors), as Prometheus applies it: the source labels joined by
// ";", the anchored regular expression.
func extensionsKeep(t *testing.T) func(map[string]string) bool {
	t.Helper()
	for _, pm := range seedprometheus.CentralPodMonitors() {
		if pm.Name != "extensions" {
			continue
		}
		for _, rc := range pm.Spec.PodMetricsEndpoints[0].RelabelConfigs {
			if rc.Action != "keep" {
				continue
			}
			re := regexp.MustCompile("^(?:" + rc.Regex + ")$")
			return func(labels map[string]string) bool {
				var values []string
				for _, l := range rc.SourceLabels {
					values = append(values, labels[string(l)])
				}
				return re.MatchString(strings.Join(values, ";"))
			}
		}
	}
	t.Fatal("gardener's seed Prometheus has no extensions PodMonitor with a keep rule")
	return nil
}

func isSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

func slicesOfKeys(m map[string]string) []string {
	var keys []string
	for k := range maps.Keys(m) {
		keys = append(keys, k)
	}
	return keys
}
