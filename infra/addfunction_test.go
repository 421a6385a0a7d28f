package infra_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/registry"
)

// Adding a function is what the developer's guide lists (functions/README.md, "A new
// function"), and nothing else: a registry with one more function (a copy of purge called
// extra), files/functions.json and values.schema.json's lists as make registry writes them from
// that registry, an entry in values.yaml, its rights in _rules.tpl and a service in
// docker-compose.yaml. No other template or test changes, and the
// chart, in keda and in knative mode, runs it as it runs purge: its Deployment and ScaledObject
// or Knative Service, its ServiceAccount and rights, and it is listed wherever purge is (the
// setup Job's consumers, the forwarder, the network policies, API priority); docker compose's
// check accepts its service.
func TestAddingAFunction(t *testing.T) {
	const added, like = "extra", "purge"
	def := entry.PurgeDefinition
	def.Name = added
	defs := append(slices.Clone(all.Functions), def)

	// The chart's files, changed as the guide says.
	files := fstest.MapFS{}
	err := fs.WalkDir(chart.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chart.FS.ReadFile(path)
		files[path] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := all.FactsOf(defs)
	if err != nil {
		t.Fatal(err)
	}
	files["files/functions.json"].Data = facts
	schema, err := registry.Schema(files[registry.SchemaFile].Data, defs)
	if err != nil {
		t.Fatal(err)
	}
	files[registry.SchemaFile].Data = schema
	edit := func(file, old, new string) {
		t.Helper()
		data := string(files[file].Data)
		if !strings.Contains(data, old) {
			t.Fatalf("%s has no %q to add the function beside", file, old)
		}
		files[file].Data = []byte(strings.ReplaceAll(data, old, new))
	}
	valuesLine := "  purge: {maxReplicas: 2, concurrency: 2, lagThreshold: 1, pollingInterval: 30, cooldownPeriod: 600, containerConcurrency: 2, timeoutSeconds: 600}\n"
	edit("values.yaml", valuesLine, valuesLine+strings.Replace(valuesLine, like, added, 1))
	files["templates/_rules.tpl"].Data = append(files["templates/_rules.tpl"].Data,
		"\n{{- define \"housekeeper.rules.extra\" -}}\n{{ include \"housekeeper.rules.purge\" . }}\n{{- end -}}\n"...)

	for _, mode := range []string{"keda", "knative"} {
		t.Run(mode, func(t *testing.T) {
			ns, values := variant(t, mode)
			r, err := chart.RenderFS(files, ns, values, kubeVersion(t))
			if err != nil {
				t.Fatalf("the chart with function %s: %v", added, err)
			}
			objs := decodeYAMLBytes(t, "chart with "+added, r.Manifest())
			checkRunsLike(t, objs, added, like, map[string][]string{
				"keda":    {"ClusterRole", "ClusterRoleBinding", "Deployment", "ScaledObject", "ServiceAccount", "VerticalPodAutoscaler"},
				"knative": {"ClusterRole", "ClusterRoleBinding", "Service", "ServiceAccount"},
			}[mode])
		})
	}

	// docker-compose.yaml with a service for it, written as purge's.
	t.Run("compose", func(t *testing.T) {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(root, "docker-compose.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		compose := string(data)
		start := strings.Index(compose, "\n  purge:\n")
		end := strings.Index(compose[start+1:], "\n\n") + start + 1
		if start < 0 || end <= start {
			t.Fatal("docker-compose.yaml has no service purge to write the function's as")
		}
		service := strings.ReplaceAll(compose[start:end], like, added)
		service = strings.Replace(service, `"127.0.0.1:8083:8080"`, `"127.0.0.1:8088:8080"`, 1)
		file := filepath.Join(t.TempDir(), "docker-compose.yaml")
		if err := os.WriteFile(file, []byte(compose[:end]+service+compose[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		// The copy takes purge's flags: its environment is checked against purge's binary.
		checkCompose(t, loadComposeFile(t, file, root), root, defs, func(name string) binary {
			if name == added {
				return binary{function: like}
			}
			return binary{function: name}
		})
	})
}

// checkRunsLike checks a rendering runs function added as it runs function like: every object
// of like's (housekeeper-<like>) has its twin for added, the same but for the name, at least of
// kinds; and every list of the functions elsewhere that names like names added too.
func checkRunsLike(t *testing.T, objs []*unstructured.Unstructured, added, like string, kinds []string) {
	t.Helper()
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[o.GetKind()+"/"+o.GetName()] = o
	}
	var twinned []string
	for _, o := range objs {
		if o.GetName() != "housekeeper-"+like {
			continue
		}
		twin := byKey[o.GetKind()+"/housekeeper-"+added]
		if twin == nil {
			t.Errorf("%s housekeeper-%s has no twin housekeeper-%s", o.GetKind(), like, added)
			continue
		}
		want, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(twin.Object)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != strings.ReplaceAll(string(want), like, added) {
			t.Errorf("%s housekeeper-%s is not housekeeper-%s's but for the name:\n%s\nwant\n%s", o.GetKind(), added, like, got, strings.ReplaceAll(string(want), like, added))
		}
		twinned = append(twinned, o.GetKind())
	}
	for _, kind := range kinds {
		if !slices.Contains(twinned, kind) {
			t.Errorf("no %s housekeeper-%s", kind, added)
		}
	}
	lists := 0
	for _, o := range objs {
		if o.GetName() == "housekeeper-"+like || o.GetName() == "housekeeper-"+added {
			continue // twins, above
		}
		walkLists(o.Object, func(list []string) {
			if slices.Contains(list, like) || slices.Contains(list, "housekeeper-"+like) {
				lists++
				if !slices.Contains(list, added) && !slices.Contains(list, "housekeeper-"+added) {
					t.Errorf("%s %s lists %v: %s, but not %s", o.GetKind(), o.GetName(), list, like, added)
				}
			}
		})
	}
	if lists == 0 {
		t.Errorf("no list of the functions names %s", like)
	}
}

// walkLists calls f with every list of names in v: a list of strings, a comma-separated string,
// and the names of a list of objects (name, or serviceAccount.name).
func walkLists(v any, f func([]string)) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			walkLists(e, f)
		}
	case []any:
		var names []string
		for _, e := range v {
			switch e := e.(type) {
			case string:
				names = append(names, e)
			case map[string]any:
				if name, ok := e["name"].(string); ok {
					names = append(names, name)
				}
				if sa, ok := e["serviceAccount"].(map[string]any); ok {
					if name, ok := sa["name"].(string); ok {
						names = append(names, name)
					}
				}
			}
			walkLists(e, f)
		}
		f(names)
	case string:
		if strings.Contains(v, ",") && !strings.ContainsAny(v, " \n") {
			f(strings.Split(v, ","))
		}
	}
}
