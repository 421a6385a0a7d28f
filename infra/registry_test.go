package infra_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/registry"
)

// The chart writes down facts the registry owns — the types housekeeper implements, the
// functions — as YAML, JSON schema and template lists. A new function, type or
// identity in the registry fails here rather than in a seed.
func TestChartListsAreTheRegistrys(t *testing.T) {
	schema := chartSchema(t)

	if got := schemaEnum(t, schema, "properties", "types", "items", "enum"); !sameSet(got, gardener.ImplementedTypes) {
		t.Errorf("values.schema.json: types may be %v, the registry implements %v (functions/gardener.ImplementedTypes)", got, gardener.ImplementedTypes)
	}
	// The templates' own list ("housekeeper.types"): every implemented type renders.
	for _, typ := range gardener.ImplementedTypes {
		values := map[string]any{"cluster": "seed-1", "types": []any{typ}}
		if typ == "local" {
			values["local"] = map[string]any{"hostPath": "/var/lib/buckets"}
		}
		if _, err := chart.Render(namespace, values, kubeVersion(t)); err != nil {
			t.Errorf("types [%s], a type the registry implements: %v", typ, err)
		}
	}

	if got := slices.Collect(maps.Keys(chartValues(t)["functions"].(map[string]any))); !sameSet(got, all.Names()) {
		t.Errorf("values.yaml: functions %v, the registry has %v (functions/all)", got, all.Names())
	}

	// Every function the registry has is deployed, talks to the API server and is scaled.
	objs := render(t, "keda")
	for _, fn := range all.Names() {
		found := false
		for _, m := range objs {
			if m.obj.GetKind() != "Deployment" || m.obj.GetName() != "housekeeper-"+fn {
				continue
			}
			found = true
			labels := m.obj.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
			if labels["networking.gardener.cloud/to-runtime-apiserver"] != "allowed" {
				t.Errorf("Deployment housekeeper-%s: no to-runtime-apiserver label (housekeeper.podNetworkLabels lists the functions by hand)", fn)
			}
		}
		if !found {
			t.Errorf("function %s of the registry has no Deployment in the keda rendering", fn)
		}
	}
}

// The chart's copy of the registry's facts (files/functions.json, which its templates read) is
// what the registry says: `make registry` writes it.
func TestChartFactsAreTheRegistrys(t *testing.T) {
	want, err := all.Facts()
	if err != nil {
		t.Fatal(err)
	}
	got, err := chart.FS.ReadFile("files/functions.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("infra/chart/files/functions.json is not the registry's facts: run make registry\n%s\nwant\n%s", got, want)
	}
}

// The schema's lists of the functions (their values, which are required, their NATS
// identities) are what make registry writes from the registry.
func TestChartSchemaListsAreTheRegistrys(t *testing.T) {
	got, err := chart.FS.ReadFile(registry.SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := registry.Schema(got, all.Functions)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("infra/chart/values.schema.json does not list the registry's functions: run make registry\n%s\nwant\n%s", got, want)
	}
}

// The bridge's rules are what it watches: files/bridge.json is bridge.Watched as make registry
// writes it, and the rendered bridge ClusterRole lists and watches exactly those resources.
func TestBridgeRulesAreWhatItWatches(t *testing.T) {
	want, err := bridge.WatchedFile()
	if err != nil {
		t.Fatal(err)
	}
	got, err := chart.FS.ReadFile("files/bridge.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("infra/chart/files/bridge.json is not what the bridge watches: run make registry\n%s\nwant\n%s", got, want)
	}
	var watched []string
	for _, g := range bridge.Watched() {
		for _, r := range g.Resources {
			watched = append(watched, g.APIGroup+"/"+r)
		}
	}
	slices.Sort(watched)
	found := false
	for _, m := range render(t, "keda") {
		if m.obj.GetKind() != "ClusterRole" || !strings.HasSuffix(m.obj.GetName(), "-bridge") {
			continue
		}
		found = true
		rules, _, _ := unstructured.NestedSlice(m.obj.Object, "rules")
		var granted []string
		for _, r := range rules {
			r := r.(map[string]any)
			if verbs := strs(r["verbs"]); !slices.Equal(verbs, []string{"list", "watch"}) {
				t.Errorf("%s: a rule with verbs %v, want list and watch only", m, verbs)
			}
			for _, g := range strs(r["apiGroups"]) {
				for _, res := range strs(r["resources"]) {
					granted = append(granted, g+"/"+res)
				}
			}
		}
		slices.Sort(granted)
		if !slices.Equal(granted, watched) {
			t.Errorf("%s grants %v, the bridge watches %v", m, granted, watched)
		}
	}
	if !found {
		t.Fatal("no bridge ClusterRole rendered")
	}
}

// functionsNeeding are the registry's functions whose needs satisfy need, sorted.
func functionsNeeding(need func(runner.Needs) bool) []string {
	return functionsNeedingOf(all.Functions, need)
}

// functionsNeedingOf are the functions of registry whose needs satisfy need, sorted.
func functionsNeedingOf(registry []runner.Definition, need func(runner.Needs) bool) []string {
	var names []string
	for _, d := range registry {
		if need(d.Needs) {
			names = append(names, d.Name)
		}
	}
	slices.Sort(names)
	return names
}

// chartSchema is values.schema.json, decoded.
func chartSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := chart.FS.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// schemaEnum is the list of strings at path in the schema.
func schemaEnum(t *testing.T, schema map[string]any, path ...string) []string {
	t.Helper()
	var node any = schema
	for _, p := range path {
		m, ok := node.(map[string]any)
		if !ok {
			t.Fatalf("values.schema.json has nothing at %v", path)
		}
		node = m[p]
	}
	list, ok := node.([]any)
	if !ok {
		t.Fatalf("values.schema.json: %v is no list", path)
	}
	out := make([]string, len(list))
	for i, v := range list {
		out[i], _ = v.(string)
	}
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
