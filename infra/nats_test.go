package infra_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The NATS install operators apply (infra/nats/nats.yaml) is the one the chart's defaults reach:
// the server housekeeper is tested with (the version go.mod pins), each pod named as KEDA asks
// for the consumer's leader, the Services and pod labels the chart's URL, monitoring endpoint and
// NetworkPolicy name, and housekeeper's accounts included.
func TestNATSInstallIsWhatTheChartReaches(t *testing.T) {
	objs := map[string]*unstructured.Unstructured{}
	for _, o := range decodeYAML(t, "nats/nats.yaml") {
		objs[o.GetKind()+"/"+o.GetName()] = o
	}
	sts := objs["StatefulSet/nats"]
	config := objs["ConfigMap/nats-config"]
	if sts == nil || config == nil || objs["Service/nats"] == nil || objs["Service/nats-headless"] == nil {
		t.Fatalf("infra/nats/nats.yaml lacks the StatefulSet, its ConfigMap or its Services: %v", objs)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(gomod)
	if pinned == nil {
		t.Fatal("go.mod pins no nats-server")
	}
	cs := containers(sts)
	if len(cs) != 1 || cs[0].Image != "nats:"+string(pinned[1]) {
		t.Errorf("the NATS pods run %+v, want image nats:%s (go.mod's nats-server)", cs, pinned[1])
	}
	conf, _, _ := unstructured.NestedString(config.Object, "data", "nats-server.conf")
	for _, want := range []string{"server_name: $POD_NAME", "http_port: 8222", "jetstream {", "include ../accounts/accounts.conf", "nats://nats-2.nats-headless:6222"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nats-server.conf has no %q:\n%s", want, conf)
		}
	}

	values := chartValues(t)
	nats := values["nats"].(map[string]any)
	if want := "nats://nats.nats.svc.cluster.local:4222"; nats["url"] != want || nats["namespace"] != "nats" {
		t.Errorf("the chart's nats.url %v (namespace %v), want %s: the Service nats in namespace nats", nats["url"], nats["namespace"], want)
	}
	if want := "nats-headless.nats.svc.cluster.local:8222"; nats["monitoringEndpoint"] != want {
		t.Errorf("the chart's nats.monitoringEndpoint %v, want %s", nats["monitoringEndpoint"], want)
	}
	podLabels, _, _ := unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "labels")
	for k, v := range nats["podLabels"].(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("the chart's NetworkPolicy selects NATS pods by %s=%v; the pods have %v", k, v, podLabels)
		}
	}
}

// chartValues is infra/chart/values.yaml.
func chartValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("chart/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
