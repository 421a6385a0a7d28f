package infra_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The releases whose CRDs the manifests are validated against, taken from their Go modules
// (the module proxy is the only thing a test may download from). Pinned here, and only here.
const (
	knativeServingModule  = "knative.dev/serving"
	knativeServingVersion = "v0.51.0" // Knative tags its Go modules v0.x for release v1.y
	knativeServingCRDs    = "config/core/300-resources"
	kedaModule            = "github.com/kedacore/keda/v2"
	kedaVersion           = "v2.21.0"
	kedaCRDs              = "config/crd/bases"
)

// namespace is where infra/base and the overlays put everything namespaced.
const namespace = "housekeeper"

const fieldOwner = client.FieldOwner("housekeeper-infra-test")

// manifest is one Kubernetes object and where it came from.
type manifest struct {
	source string // kustomization directory or file, relative to infra/
	obj    *unstructured.Unstructured
}

func (m manifest) String() string {
	ns := m.obj.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s: %s %s%s", m.source, m.obj.GetKind(), ns, m.obj.GetName())
}

// Every kustomization renders, and what it renders holds together: images set, everything in
// the housekeeper namespace, every reference (ConfigMap, ServiceAccount, Role, scale target,
// JetStream consumer) pointing at something that exists.
func TestKustomizationsRender(t *testing.T) {
	dirs := kustomizationDirs(t)
	for _, want := range []string{".", "base", "rbac", "knative", "keda", "overlays/knative", "overlays/keda"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("infra/%s has no kustomization.yaml", want)
		}
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			if len(objs) == 0 {
				t.Fatalf("infra/%s renders nothing", dir)
			}
			if dir == "base" || strings.HasPrefix(dir, "overlays/") {
				checkDeployable(t, objs, strings.HasPrefix(dir, "overlays/"))
			}
		})
	}
	// What each overlay must contain, beyond the base.
	for overlay, kinds := range map[string][]string{
		"overlays/knative": {"Service.serving.knative.dev/housekeeper-bucket", "Service.serving.knative.dev/housekeeper-entry", "Service.serving.knative.dev/housekeeper-purge"},
		"overlays/keda": {
			"Deployment.apps/housekeeper-bucket", "Deployment.apps/housekeeper-entry", "Deployment.apps/housekeeper-purge",
			"ScaledObject.keda.sh/housekeeper-bucket", "ScaledObject.keda.sh/housekeeper-entry", "ScaledObject.keda.sh/housekeeper-purge",
		},
	} {
		have := map[string]bool{}
		for _, m := range render(t, overlay) {
			have[identity(m.obj)] = true
		}
		for _, k := range append(kinds, "Deployment.apps/housekeeper-bridge", "Job.batch/housekeeper-setup", "Namespace/housekeeper",
			"ClusterRole.rbac.authorization.k8s.io/housekeeper-purge", "FlowSchema.flowcontrol.apiserver.k8s.io/housekeeper") {
			if !have[k] {
				t.Errorf("infra/%s does not render %s", overlay, k)
			}
		}
	}
}

// checkDeployable checks a full rendering (base or overlay); an overlay also sets the image.
func checkDeployable(t *testing.T, objs []manifest, imagesSet bool) {
	t.Helper()
	byID := map[string]*unstructured.Unstructured{}
	for _, m := range objs {
		byID[identity(m.obj)] = m.obj
	}
	exists := func(id string) bool { return byID[id] != nil }
	functions := map[string]bool{}
	for _, m := range objs {
		o := m.obj
		if namespaced(o) && o.GetNamespace() != namespace {
			t.Errorf("%s: namespace %q, want %q", m, o.GetNamespace(), namespace)
		}
		if o.GetLabels()["app.kubernetes.io/part-of"] != "housekeeper" {
			t.Errorf("%s: no label app.kubernetes.io/part-of=housekeeper", m)
		}
		switch o.GetKind() {
		case "ClusterRoleBinding", "RoleBinding":
			ref, _, _ := unstructured.NestedStringMap(o.Object, "roleRef")
			if !exists(ref["kind"] + ".rbac.authorization.k8s.io/" + ref["name"]) {
				t.Errorf("%s: roleRef %s %s is not rendered", m, ref["kind"], ref["name"])
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				s := s.(map[string]any)
				if s["kind"] == "ServiceAccount" && (s["namespace"] != namespace || !exists("ServiceAccount/"+s["name"].(string))) {
					t.Errorf("%s: subject ServiceAccount %v/%v is not rendered", m, s["namespace"], s["name"])
				}
			}
		case "FlowSchema":
			plc, _, _ := unstructured.NestedString(o.Object, "spec", "priorityLevelConfiguration", "name")
			if !exists("PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io/" + plc) {
				t.Errorf("%s: priority level %s is not rendered", m, plc)
			}
		case "ScaledObject":
			target, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name")
			dep := byID["Deployment.apps/"+target]
			if dep == nil {
				t.Errorf("%s: scaleTargetRef %s is not a rendered Deployment", m, target)
				continue
			}
			// To zero for real: the setup Job, not a first pod, creates the consumer KEDA reads.
			if n, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "minReplicaCount"); !ok || fmt.Sprint(n) != "0" {
				t.Errorf("%s: minReplicaCount %v, want 0", m, n)
			}
			if _, ok, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "replicas"); ok {
				t.Errorf("%s: Deployment %s sets replicas, which KEDA owns", m, target)
			}
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			for _, tr := range triggers {
				md, _, _ := unstructured.NestedStringMap(tr.(map[string]any), "metadata")
				fn := functionOf(dep)
				if md["stream"] != events.RecordStream || md["consumer"] != fn {
					t.Errorf("%s: trigger reads consumer %s/%s, but %s runs function %q, whose durable consumer is %s/%s",
						m, md["stream"], md["consumer"], target, fn, events.RecordStream, fn)
				}
				functions[md["consumer"]] = true
			}
		}
		for _, c := range containers(o) {
			if imagesSet && (c.Image == "housekeeper" || !strings.Contains(c.Image, ":")) {
				t.Errorf("%s: container %s has image %q: not set by the kustomization's images", m, c.Name, c.Image)
			}
			for _, cm := range c.ConfigMaps {
				if !exists("ConfigMap/" + cm) {
					t.Errorf("%s: container %s reads ConfigMap %s, which is not rendered (kustomize did not rename the reference?)", m, c.Name, cm)
				}
			}
		}
		if sa, ok, _ := unstructured.NestedString(o.Object, append(podSpecPath(o), "serviceAccountName")...); ok && !exists("ServiceAccount/"+sa) {
			t.Errorf("%s: serviceAccountName %s is not rendered", m, sa)
		}
	}
	if len(functions) > 0 {
		for _, fn := range all.NamesOf(all.Gardener) {
			if !functions[fn] {
				t.Errorf("no ScaledObject scales the %s function", fn)
			}
		}
	}
}

// Every Kubernetes manifest under infra/ — each kustomization rendered, and the examples —
// is applied with a server-side dry run to a real kube-apiserver that has housekeeper's, Knative
// Serving's and KEDA's CRDs, so the server validates each object against its schema. Pods
// must pass the restricted Pod Security Standard without a warning.
func TestManifestsOnAPIServer(t *testing.T) {
	all := allManifests(t)
	env := testenv.Start(t, testenv.WithKube())
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(env.Kube.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	installCRDs(t, env.Kube.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Namespaces are created for real: a dry-run object in a namespace that does not exist is
	// rejected, and Pod Security admission reads the namespace's labels.
	for _, m := range all {
		if m.obj.GetKind() == "Namespace" {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
	warnings.take()
	applied := 0
	for _, m := range all {
		if m.obj.GetKind() == "Namespace" {
			continue
		}
		err := dryRunApply(ctx, c, m.obj)
		if err != nil {
			t.Errorf("%s: rejected by the API server: %v", m, err)
			continue
		}
		for _, w := range warnings.take() {
			t.Errorf("%s: API server warning: %s", m, w)
		}
		applied++
	}
	t.Logf("%d objects applied with a server-side dry run", applied)

	// The same path must reject broken objects; if it did not, the loop above proved nothing.
	broken := map[string]func(u *unstructured.Unstructured) bool{
		"ScaledObject with a string minReplicaCount": func(u *unstructured.Unstructured) bool {
			return u.GetKind() == "ScaledObject" && unstructured.SetNestedField(u.Object, "zero", "spec", "minReplicaCount") == nil
		},
		"Knative Service with an unknown container field": func(u *unstructured.Unstructured) bool {
			if u.GetKind() != "Service" || u.GetAPIVersion() != "serving.knative.dev/v1" {
				return false
			}
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			cs[0].(map[string]any)["imagePullPolicyy"] = "Always"
			return unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers") == nil
		},
		"Deployment with a named port out of range": func(u *unstructured.Unstructured) bool {
			if u.GetKind() != "Deployment" {
				return false
			}
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			cs[0].(map[string]any)["ports"] = []any{map[string]any{"name": "http", "containerPort": int64(70000)}}
			return unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers") == nil
		},
		"PriorityLevelConfiguration dealing a hand larger than its queues": func(u *unstructured.Unstructured) bool {
			return u.GetKind() == "PriorityLevelConfiguration" &&
				unstructured.SetNestedField(u.Object, int64(64), "spec", "limited", "limitResponse", "queuing", "handSize") == nil
		},
		"BackupEntry without spec.bucketName": func(u *unstructured.Unstructured) bool {
			if u.GetKind() != "BackupEntry" {
				return false
			}
			unstructured.RemoveNestedField(u.Object, "spec", "bucketName")
			return true
		},
	}
	for what, breakIt := range broken {
		found := false
		for _, m := range all {
			u := m.obj.DeepCopy()
			if !breakIt(u) {
				continue
			}
			found = true
			err := dryRunApply(ctx, c, u)
			var status apierrors.APIStatus
			// Schema errors of an apply come back as 500 "failed to create typed patch object",
			// validation errors as 422 Invalid: either is the server refusing the object.
			if !errors.As(err, &status) || status.Status().Code < 400 {
				t.Errorf("%s (%s): the API server answered %v, want it rejected", what, m, err)
			} else {
				t.Logf("%s: rejected (%d %s)", what, status.Status().Code, status.Status().Reason)
			}
			break
		}
		if !found {
			t.Errorf("no manifest to break into a %s", what)
		}
	}
}

// dryRunApply applies obj with a server-side dry run. A namespaced object without a namespace
// (from infra/rbac, infra/knative, infra/keda, which leave it to the overlays) goes to the
// housekeeper namespace.
func dryRunApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	if obj.GetNamespace() == "" {
		isNamespaced, err := c.IsObjectNamespaced(obj)
		if err != nil {
			return err
		}
		if isNamespaced {
			obj.SetNamespace(namespace)
		}
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership, client.DryRunAll)
}

// allManifests is every Kubernetes object under infra/: what every kustomization renders, plus
// the objects of YAML files no kustomization includes (infra/examples). It fails the test on a
// YAML or JSON file it cannot account for, and on a manifest that a kustomization directory
// holds but does not render.
func allManifests(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	rendered := map[string]bool{}
	kustomized := map[string]bool{}
	for _, dir := range kustomizationDirs(t) {
		kustomized[dir] = true
		for _, m := range render(t, dir) {
			rendered[identity(m.obj)] = true
			all = append(all, m)
		}
	}
	for _, file := range filesUnder(t, ".yaml", ".yml") {
		docs := decodeYAML(t, file)
		for _, doc := range docs {
			if doc.GetAPIVersion() == "" || doc.GetKind() == "" {
				if nonKubernetes[file] == nil {
					t.Errorf("infra/%s is not a Kubernetes manifest and no test knows what it is", file)
				}
				continue
			}
			if strings.HasPrefix(doc.GetAPIVersion(), "kustomize.config.k8s.io/") {
				continue
			}
			switch {
			case kustomized[filepath.Dir(file)]:
				if !rendered[identity(doc)] {
					t.Errorf("infra/%s: %s %s is in a kustomization's directory but no kustomization renders it", file, doc.GetKind(), doc.GetName())
				}
			default:
				all = append(all, manifest{source: file, obj: doc})
			}
		}
	}
	// Namespaces first, then CRDs, then the rest, as kubectl apply would need them.
	order := func(m manifest) int {
		switch m.obj.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(all, func(a, b manifest) int { return order(a) - order(b) })
	return all
}

// kustomizationDirs lists the directories under infra/ (relative, "." for infra/ itself) that
// hold a kustomization.yaml.
func kustomizationDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, f := range filesUnder(t, ".yaml") {
		if filepath.Base(f) == "kustomization.yaml" && !isComponent(t, f) {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	slices.Sort(dirs)
	return dirs
}

// isComponent says the kustomization file f is a Component, rendered only as part of the
// overlays that include it.
func isComponent(t *testing.T, f string) bool {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), "\nkind: Component\n")
}

// filesUnder lists the files under infra/ with one of the extensions, relative to infra/,
// leaving out infra/crds (the upstream CRDs, checked by crds_test.go and rendered by
// infra/kustomization.yaml).
func filesUnder(t *testing.T, exts ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "crds" || strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(exts, filepath.Ext(path)) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var renderCache sync.Map // dir → []manifest

// render builds the kustomization in infra/<dir> as `kubectl kustomize` would (files only
// from within the kustomization's root, no plugins).
func render(t *testing.T, dir string) []manifest {
	t.Helper()
	if cached, ok := renderCache.Load(dir); ok {
		return cached.([]manifest)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build infra/%s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var objs []manifest
	for _, u := range decodeYAMLBytes(t, "kustomize build infra/"+dir, out) {
		objs = append(objs, manifest{source: "kustomize build infra/" + dir, obj: u})
	}
	renderCache.Store(dir, objs)
	return objs
}

func decodeYAML(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return decodeYAMLBytes(t, "infra/"+file, data)
}

func decodeYAMLBytes(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
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

// identity names an object the way the checks compare them: Kind.group/name.
func identity(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + u.GetName()
}

func namespaced(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "BackupBucket", "BackupEntry",
		"FlowSchema", "PriorityLevelConfiguration":
		return false
	}
	return true
}

// podSpecPath is where a workload keeps its pod spec.
func podSpecPath(u *unstructured.Unstructured) []string {
	switch u.GetKind() {
	case "Deployment", "StatefulSet", "DaemonSet", "Job":
		return []string{"spec", "template", "spec"}
	case "Service":
		if u.GetAPIVersion() == "serving.knative.dev/v1" {
			return []string{"spec", "template", "spec"}
		}
	}
	return nil
}

// container is what the checks need of a container.
type container struct {
	Name, Image   string
	Command, Args []string
	Env           []envVar
	ConfigMaps    []string // envFrom configMapRef names
}

type envVar struct {
	Name, Value string
	FromField   bool // valueFrom: the value is only known in the pod
}

func containers(u *unstructured.Unstructured) []container {
	path := podSpecPath(u)
	if path == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, append(path, "containers")...)
	data, _ := json.Marshal(raw)
	var cs []struct {
		Name, Image   string
		Command, Args []string
		Env           []struct {
			Name, Value string
			ValueFrom   map[string]any
		}
		EnvFrom []struct {
			ConfigMapRef *struct{ Name string }
		}
	}
	_ = json.Unmarshal(data, &cs)
	out := make([]container, 0, len(cs))
	for _, c := range cs {
		oc := container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args}
		for _, e := range c.Env {
			oc.Env = append(oc.Env, envVar{Name: e.Name, Value: e.Value, FromField: e.ValueFrom != nil})
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				oc.ConfigMaps = append(oc.ConfigMaps, ef.ConfigMapRef.Name)
			}
		}
		out = append(out, oc)
	}
	return out
}

// functionOf is the function a workload's housekeeper container runs ("" for none).
func functionOf(u *unstructured.Unstructured) string {
	for _, c := range containers(u) {
		if len(c.Args) >= 2 && c.Args[0] == "function" {
			return c.Args[1]
		}
	}
	return ""
}

// warningCollector keeps the API server's warnings (Pod Security, deprecations).
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.warnings
	w.warnings = nil
	return got
}

// installCRDs installs Knative Serving's and KEDA's CRDs from their released Go modules.
func installCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	paths := []string{
		filepath.Join(moduleDir(t, knativeServingModule, knativeServingVersion), knativeServingCRDs),
		filepath.Join(moduleDir(t, kedaModule, kedaVersion), kedaCRDs),
	}
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: time.Minute})
	if err != nil {
		t.Fatalf("installing the Knative Serving and KEDA CRDs from %v: %v", paths, err)
	}
	var names []string
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	for _, want := range []string{"services.serving.knative.dev", "scaledobjects.keda.sh"} {
		if !slices.Contains(names, want) {
			t.Fatalf("CRD %s not among those installed from the modules: %v", want, names)
		}
	}
}

// moduleDir downloads module@version through the Go module proxy (or finds it in the module
// cache) and returns its directory.
func moduleDir(t *testing.T, module, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &mod); err != nil || jsonErr != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s %s", module, version, err, mod.Error, stderr.String())
	}
	return mod.Dir
}
