package knative_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// root is the repository's root, which holds the chart and its values.
const root = "../.."

// featuresValue is the value through which a rendering declares the Knative Serving feature flags
// its cluster has on (config-features in knative-serving): knative.features, a map of flag to
// state. The tests give Knative exactly those flags, on top of Knative's defaults. It is the value
// proposed with the fix of the priorityClassName defect; a chart without it ignores it.
var featuresValue = []string{"knative", "features"}

// rendering is a rendering of the chart in knative mode: its namespace and values.
type rendering struct {
	name      string
	namespace string
	values    func(t *testing.T) map[string]any
	// mayRefuse is a text the chart may refuse this rendering with, at render time, instead of
	// rendering it: the fixed chart refusing what the declared cluster's Knative would refuse.
	mayRefuse string
}

// renderings are the chart's knative-mode renderings:
//
//   - knative: infra/manifests_test.go's "knative" rendering (installed by hand into the
//     namespace housekeeper with every option on);
//   - gardener: the values of infra/gardener/controller-registration.yaml's ControllerDeployment,
//     with mode: knative, plus what gardenlet adds (as infra/manifests_test.go's "gardener"), for
//     a seed whose Knative Serving runs with its default feature flags;
//   - gardener-priorityclass-flag: the same, declaring kubernetes.podspec-priorityclassname:
//     enabled in knative.features, for a seed whose Knative has the flag on.
func renderings() []rendering {
	return []rendering{
		{name: "knative", namespace: "housekeeper", values: func(*testing.T) map[string]any {
			// Keep equal to variant("knative") in infra/manifests_test.go.
			return map[string]any{
				"cluster": "test-seed", "types": []any{"azure", "aws", "gcp"}, "mode": "knative",
				"monitoring": map[string]any{"enabled": true}, "vpa": map[string]any{"enabled": true},
				"retention": map[string]any{"default": "24h", "byPurpose": map[string]any{"production": "168h"}},
				"azure": map[string]any{"authorityHost": "https://login.stack.example.com", "resourceManager": "https://management.stack.example.com",
					"blobServiceURL": "https://{account}.blob.stack.example.com"},
			}
		}},
		{name: "gardener", namespace: "extension-housekeeper-3c7a1", values: gardenerValues, mayRefuse: "kubernetes.podspec-priorityclassname"},
		{name: "gardener-priorityclass-flag", namespace: "extension-housekeeper-3c7a1", values: func(t *testing.T) map[string]any {
			v := gardenerValues(t)
			v["knative"] = map[string]any{"features": map[string]any{"kubernetes.podspec-priorityclassname": "enabled"}}
			return v
		}},
	}
}

// gardenerValues are the ControllerDeployment's helm.values with mode: knative and what
// gardenlet's ControllerInstallation reconciler adds (as infra/manifests_test.go's "gardener").
func gardenerValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "infra/gardener/controller-registration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	for _, u := range decode(t, "infra/gardener/controller-registration.yaml", data) {
		if u.GetKind() == "ControllerDeployment" {
			values, _, _ = unstructured.NestedMap(u.Object, "helm", "values")
		}
	}
	if values == nil {
		t.Fatal("infra/gardener/controller-registration.yaml: no ControllerDeployment with helm.values")
	}
	values["mode"] = "knative"
	values["gardener"] = map[string]any{
		"version": "v1.150.0",
		"garden":  map[string]any{"clusterIdentity": "garden"},
		"seed":    map[string]any{"name": "aws-eu1", "clusterIdentity": "seed-aws-eu1", "provider": "aws", "region": "eu-west-1"},
	}
	return values
}

// features are the Knative feature flags rendering's values declare (featuresValue).
func features(values map[string]any) map[string]string {
	declared, _, _ := unstructured.NestedMap(values, featuresValue...)
	out := map[string]string{}
	for k, v := range declared {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// rendered is a rendering's objects, or the chart's refusal.
type rendered struct {
	rendering
	values  map[string]any
	objects []*unstructured.Unstructured
}

// render renders r as gardenlet does (infra/chart.Render). A refusal is returned, not fatal.
func render(t *testing.T, r rendering) (*rendered, error) {
	t.Helper()
	values := r.values(t)
	out, err := chart.Render(r.namespace, maps.Clone(values), kubeVersion(t))
	if err != nil {
		return nil, err
	}
	return &rendered{rendering: r, values: values, objects: decode(t, "chart ("+r.name+")", out.Manifest())}, nil
}

// services are the Knative Services of a rendering.
func (r *rendered) services() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range r.objects {
		if u.GetAPIVersion() == "serving.knative.dev/v1" && u.GetKind() == "Service" {
			out = append(out, u)
		}
	}
	return out
}

// object is the rendered object of kind and name (nil: none).
func (r *rendered) object(kind, name string) *unstructured.Unstructured {
	for _, u := range r.objects {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// function is a function's values (infra/chart/values.yaml functions.<name>), merged over the
// chart's defaults.
func (r *rendered) function(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := chart.FS.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := sigsyaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	f, _, _ := unstructured.NestedMap(defaults, "functions", name)
	if f == nil {
		f = map[string]any{}
	}
	if over, _, _ := unstructured.NestedMap(r.values, "functions", name); over != nil {
		maps.Copy(f, over)
	}
	return f
}

func decode(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// kubeVersion is the Kubernetes version the tests run (scripts/versions.env).
func kubeVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "scripts/versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k == "KUBERNETES_VERSION" {
			return v
		}
	}
	t.Fatal("scripts/versions.env: no KUBERNETES_VERSION")
	return ""
}

// asJSON is u as JSON, for Knative's decoders.
func asJSON(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
