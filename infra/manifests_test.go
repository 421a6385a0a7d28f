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
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"k8s.io/utils/ptr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The releases whose CRDs the manifests are validated against, taken from their Go modules
// (the module proxy is the only thing a test may download from). Pinned here, and only here;
// KEDA's by test/keda/go.mod, whose scaler judges the ScaledObjects (test/autoscaling).
const (
	knativeServingModule  = "knative.dev/serving"
	knativeServingVersion = "v0.51.0" // Knative tags its Go modules v0.x for release v1.y
	knativeServingCRDs    = "config/core/300-resources"
	kedaModule            = "github.com/kedacore/keda/v2"
	kedaCRDs              = "config/crd/bases"
)

// namespace is where the hand-installed renderings (keda, knative) put everything namespaced.
const namespace = "housekeeper"

const fieldOwner = client.FieldOwner("housekeeper-infra-test")

// manifest is one Kubernetes object and where it came from.
type manifest struct {
	source string // the chart's rendering, or a file relative to infra/
	obj    *unstructured.Unstructured
}

func (m manifest) String() string {
	ns := m.obj.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s: %s %s%s", m.source, m.obj.GetKind(), ns, m.obj.GetName())
}

// Every rendering of the chart holds together: the image pinned to the chart's release,
// everything in the release's namespace, every reference (ConfigMap, ServiceAccount, Role, scale
// target, JetStream consumer) pointing at something rendered; each mode renders its functions;
// and every template renders something in some rendering (all options are on in one).
func TestChartRenders(t *testing.T) {
	templatesUsed := map[string]bool{}
	for _, name := range renderings {
		t.Run(name, func(t *testing.T) {
			ns, _ := variant(t, name)
			objs := render(t, name)
			if len(objs) == 0 {
				t.Fatal("renders nothing")
			}
			checkDeployable(t, objs, ns)
			have := map[string]bool{}
			for _, m := range objs {
				have[identity(m.obj)] = true
			}
			want := []string{"Deployment.apps/housekeeper-bridge", "ConfigMap/housekeeper-config", "ClusterRole.rbac.authorization.k8s.io/housekeeper-purge",
				"FlowSchema.flowcontrol.apiserver.k8s.io/housekeeper", "PodDisruptionBudget.policy/housekeeper-bridge",
				"ValidatingAdmissionPolicy.admissionregistration.k8s.io/housekeeper-retention", "NetworkPolicy.networking.k8s.io/housekeeper-to-nats",
				"CustomResourceDefinition.apiextensions.k8s.io/etcdbackupconfigs.backup.housekeeper.dev"}
			if name == "knative" {
				want = append(want, "Deployment.apps/housekeeper-forward") // one for every function
			}
			for _, fn := range all.Names() {
				if name == "knative" {
					want = append(want, "Service.serving.knative.dev/housekeeper-"+fn)
				} else {
					want = append(want, "Deployment.apps/housekeeper-"+fn, "ScaledObject.keda.sh/housekeeper-"+fn)
				}
			}
			for _, id := range want {
				if !have[id] {
					t.Errorf("does not render %s", id)
				}
			}
			if !slices.ContainsFunc(objs, func(m manifest) bool { return strings.HasPrefix(identity(m.obj), "Job.batch/housekeeper-setup-") }) {
				t.Error("does not render the setup Job")
			}
		})
		for _, f := range renderedFiles(t, name) {
			templatesUsed[f] = true
		}
	}
	templates, err := fs.Glob(chart.FS, "templates/*.yaml")
	if err != nil || len(templates) == 0 {
		t.Fatalf("the chart's templates: %v %v", templates, err)
	}
	for _, f := range templates {
		if !templatesUsed[f] {
			t.Errorf("infra/chart/%s renders nothing in any rendering: is it tested?", f)
		}
	}
}

// The chart refuses what would be unsafe or meaningless, at render time and naming the value:
// no types (an empty list would serve nothing; it must never mean every type), a type
// housekeeper does not implement, no cluster name outside Gardener, an unknown mode. What a
// type or an enum says is refused by values.schema.json (its message names the value's path);
// what takes more than one value, or says why, by the templates.
func TestChartRefusesUnsafeValues(t *testing.T) {
	base := func() map[string]any { return map[string]any{"cluster": "seed-1", "types": []any{"azure"}} }
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"no types", func(v map[string]any) { delete(v, "types") }, "types is required"},
		{"empty types", func(v map[string]any) { v["types"] = []any{} }, "types is required"},
		{"unknown type", func(v map[string]any) { v["types"] = []any{"azrue"} }, `at '/types/0': value must be one of 'aws', 'azure', 'gcp', 'local', 'openstack'`},
		{"no cluster", func(v map[string]any) { delete(v, "cluster") }, "cluster is required"},
		{"unknown mode", func(v map[string]any) { v["mode"] = "lambda" }, `at '/mode': value must be one of 'keda', 'knative'`},
		{"local without its directory", func(v map[string]any) { v["types"] = []any{"local"} }, "set local.hostPath"},
		{"identities in NATS's global account", func(v map[string]any) { v["nats"] = map[string]any{"account": "$G"} }, "nats.account $G"},
		{"jwt identities without their account", func(v map[string]any) { v["nats"] = map[string]any{"credentials": "jwt"} }, "nats.account is required with jwt credentials"},
		{"jwt identities in an account that is no public key", func(v map[string]any) {
			v["nats"] = map[string]any{"credentials": "jwt", "account": "HOUSEKEEPER"}
		}, "the account is its public key"},
		{"an unknown credentials form", func(v map[string]any) { v["nats"] = map[string]any{"credentials": "yaml"} }, `at '/nats/credentials': value must be one of 'config', 'jwt'`},
		{"an Azure authority without its Resource Manager", func(v map[string]any) {
			v["azure"] = map[string]any{"authorityHost": "https://login.example.com"}
		}, "azure.authorityHost and azure.resourceManager go together"},
	} {
		v := base()
		tc.change(v)
		_, err := chart.Render(namespace, v, kubeVersion(t))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: render error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := chart.Render(namespace, base(), kubeVersion(t)); err != nil {
		t.Errorf("the minimal values: %v", err)
	}
}

// As gardenlet installs it, the cluster is the seed's name and the types are the registered
// ones; the chart of the registration's OCI reference is this one.
func TestChartAsGardenletInstallsIt(t *testing.T) {
	reg, dep := registration(t)
	objs := render(t, "gardener")
	var config *unstructured.Unstructured
	for _, m := range objs {
		if identity(m.obj) == "ConfigMap/housekeeper-config" {
			config = m.obj
		}
	}
	if config == nil {
		t.Fatal("no ConfigMap housekeeper-config")
	}
	data, _, _ := unstructured.NestedStringMap(config.Object, "data")
	if data["HOUSEKEEPER_CLUSTER"] != gardenerSeed {
		t.Errorf("HOUSEKEEPER_CLUSTER=%q, want the seed's name %q", data["HOUSEKEEPER_CLUSTER"], gardenerSeed)
	}
	var registered []string
	for _, r := range reg.Spec.Resources {
		if r.Kind == "BackupBucket" || r.Kind == "BackupEntry" {
			registered = append(registered, r.Type)
		}
	}
	slices.Sort(registered)
	registered = slices.Compact(registered)
	if got := strings.Split(data["HOUSEKEEPER_TYPES"], ","); !slices.Equal(got, registered) {
		t.Errorf("HOUSEKEEPER_TYPES=%v, but the ControllerRegistration registers %v", got, registered)
	}
	meta := chartMetadata(t)
	if dep.Helm == nil || dep.Helm.OCIRepository == nil || !strings.HasSuffix(ptr.Deref(dep.Helm.OCIRepository.Ref, ""), "/housekeeper:"+meta.Version) {
		t.Errorf("the ControllerDeployment's chart is not this chart's version %s: %+v", meta.Version, dep.Helm)
	}
	for _, m := range objs {
		for _, c := range containers(m.obj) {
			if want := "v" + meta.AppVersion; !strings.HasSuffix(c.Image, ":"+want) {
				t.Errorf("%s: container %s has image %q, want the release's tag %s", m, c.Name, c.Image, want)
			}
		}
		if path := podSpecPath(m.obj); path != nil {
			if pc, _, _ := unstructured.NestedString(m.obj.Object, append(path, "priorityClassName")...); pc != "gardener-system-900" {
				t.Errorf("%s: priorityClassName %q, want gardener-system-900 from the ControllerDeployment", m, pc)
			}
		}
	}
}

// checkDeployable checks a full rendering into namespace ns.
func checkDeployable(t *testing.T, objs []manifest, ns string) {
	t.Helper()
	byID := map[string]*unstructured.Unstructured{}
	for _, m := range objs {
		byID[identity(m.obj)] = m.obj
	}
	exists := func(id string) bool { return byID[id] != nil }
	functions := map[string]bool{}
	for _, m := range objs {
		o := m.obj
		// The one exception: the seed Plutono's dashboard, which it reads from the garden
		// namespace (TestMonitoringAsTheSeedSelectsIt).
		if namespaced(o) && o.GetNamespace() != ns && identity(o) != "ConfigMap/housekeeper-dashboard" {
			t.Errorf("%s: namespace %q, want %q", m, o.GetNamespace(), ns)
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
				if s["kind"] == "ServiceAccount" && (s["namespace"] != ns || !exists("ServiceAccount/"+s["name"].(string))) {
					t.Errorf("%s: subject ServiceAccount %v/%v is not rendered", m, s["namespace"], s["name"])
				}
			}
		case "Job":
			// Under gardenlet a Job is an object of the ManagedResource: deleted from under it
			// (ttlSecondsAfterFinished) gardener-resource-manager reports it missing, and a
			// deadline fails it for good while it still waits for NATS or the identities Secret.
			for _, field := range []string{"ttlSecondsAfterFinished", "activeDeadlineSeconds"} {
				if v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", field); ok {
					t.Errorf("%s: spec.%s %v", m, field, v)
				}
			}
		case "FlowSchema":
			plc, _, _ := unstructured.NestedString(o.Object, "spec", "priorityLevelConfiguration", "name")
			if !exists("PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io/" + plc) {
				t.Errorf("%s: priority level %s is not rendered", m, plc)
			}
		case "ValidatingAdmissionPolicyBinding":
			policy, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
			if !exists("ValidatingAdmissionPolicy.admissionregistration.k8s.io/" + policy) {
				t.Errorf("%s: policy %s is not rendered", m, policy)
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
			if !strings.Contains(c.Image, ":v") && !strings.Contains(c.Image, "@sha256:") || strings.HasSuffix(c.Image, ":latest") {
				t.Errorf("%s: container %s has image %q, not pinned to a release", m, c.Name, c.Image)
			}
			for _, cm := range c.ConfigMaps {
				if !exists("ConfigMap/" + cm) {
					t.Errorf("%s: container %s reads ConfigMap %s, which is not rendered", m, c.Name, cm)
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

// Every Kubernetes manifest under infra/ — each rendering of the chart, and the examples — is
// applied with a server-side dry run to a real kube-apiserver that has housekeeper's, Knative
// Serving's, KEDA's, the Prometheus Operator's and the VPA's CRDs, so the server validates each
// object against its schema. Pods must pass the restricted Pod Security Standard without a
// warning.
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

	// The releases' namespaces are created for real, enforcing the restricted Pod Security
	// Standard (as gardenlet's extension namespaces may): a dry-run object in a namespace that
	// does not exist is rejected, and Pod Security admission reads the namespace's labels.
	for _, name := range renderings {
		ns, _ := variant(t, name)
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("v1")
		obj.SetKind("Namespace")
		obj.SetName(ns)
		level := "restricted"
		if ns == localNamespace {
			level = "privileged"
		}
		obj.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level})
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
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

// createNamespace creates the namespace ns, where a rendering's namespaced objects go.
func createNamespace(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("Namespace")
	obj.SetName(ns)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership); err != nil {
		t.Fatalf("namespace %s: %v", ns, err)
	}
}

// dryRunApply applies obj with a server-side dry run. A namespaced object without a namespace
// (an example) goes to the housekeeper namespace.
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

// allManifests is every Kubernetes object under infra/: each rendering of the chart, plus the
// objects of the YAML files outside the chart (infra/examples, infra/gardener). It fails the
// test on a YAML or JSON file it cannot account for.
func allManifests(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	for _, name := range renderings {
		all = append(all, render(t, name)...)
	}
	for _, file := range filesUnder(t, ".yaml", ".yml") {
		for _, doc := range decodeYAML(t, file) {
			if doc.GetAPIVersion() == "" || doc.GetKind() == "" {
				if nonKubernetes[file] == nil {
					t.Errorf("infra/%s is not a Kubernetes manifest and no test knows what it is", file)
				}
				continue
			}
			if strings.HasPrefix(file, "gardener/") {
				continue // garden objects, for the garden's gardener-apiserver (test/conformance)
			}
			all = append(all, manifest{source: file, obj: doc})
		}
	}
	// CRDs first, as kubectl apply would need them.
	order := func(m manifest) int {
		if m.obj.GetKind() == "CustomResourceDefinition" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(all, func(a, b manifest) int { return order(a) - order(b) })
	return all
}

// filesUnder lists the files under infra/ with one of the extensions, relative to infra/,
// leaving out infra/crds (the upstream CRDs, checked by crds_test.go) and the chart (its
// templates are not YAML until rendered; render checks them).
func filesUnder(t *testing.T, exts ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "crds" || path == "chart" || strings.HasPrefix(d.Name(), ".") && path != "." {
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

// renderings are the chart's renderings the tests check: "keda" and "knative", installed by
// hand into the namespace housekeeper with every option on, "gardener", as gardenlet installs
// it from infra/gardener/controller-registration.yaml, and "local", with the local provider.
var renderings = []string{"keda", "knative", "gardener", "local"}

// withoutEtcdBackups is the "keda" rendering with etcdBackupConfig.enabled false: without the
// EtcdBackupConfig feature's functions, rights and CRDs.
const withoutEtcdBackups = "keda-without-etcdbackups"

// localNamespace is the "local" rendering's, where Pod Security admits the hostPath volume.
const localNamespace = "housekeeper-local"

// gardenerSeed is the seed gardenlet installs the "gardener" rendering into.
const gardenerSeed = "aws-eu1"

// variant is the namespace and values of a rendering.
func variant(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	switch name {
	case "keda", "knative":
		values := map[string]any{
			"cluster": "test-seed", "types": []any{"azure", "aws", "gcp"}, "mode": name,
			"monitoring": map[string]any{"enabled": true}, "vpa": map[string]any{"enabled": true},
			"retention": map[string]any{"default": "24h", "byPurpose": map[string]any{"production": "168h"}},
			"azure": map[string]any{"authorityHost": "https://login.stack.example.com", "resourceManager": "https://management.stack.example.com",
				"blobServiceURL": "https://{account}.blob.stack.example.com"},
			"image":            map[string]any{"pullCredentials": registryConfig},
			"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		}
		drill := map[string]any{"liveShootEtcd": true}
		if name == "keda" { // Knative runs no init containers without a feature of its own
			drill["etcdBackupRestoreImage"] = etcdBackupRestoreImage
		}
		values["drill"] = drill
		return namespace, values
	case withoutEtcdBackups:
		// Not among renderings: every check of those expects the five functions.
		_, values := variant(t, "keda")
		values["etcdBackupConfig"] = map[string]any{"enabled": false}
		return namespace, values
	case "local":
		// The local provider's buckets are a hostPath volume, which no Pod Security level but
		// privileged admits: a development set-up, in a namespace of its own.
		return localNamespace, map[string]any{"cluster": "dev", "types": []any{"local"}, "local": map[string]any{"hostPath": "/var/lib/housekeeper-buckets"}}
	case "gardener":
		// The garden Secret of the NATS identities substituted, as gardenlet does.
		issued, err := gardenIdentities()
		if err != nil {
			t.Fatal(err)
		}
		values, err := gardenletValues(t, gardenSecretFromNATSAuth(t, issued))
		if err != nil {
			t.Fatal(err)
		}
		// What gardenlet's ControllerInstallation reconciler adds (the part the chart reads).
		values["gardener"] = map[string]any{
			"version": "v1.150.0",
			"garden":  map[string]any{"clusterIdentity": "garden"},
			"seed":    map[string]any{"name": gardenerSeed, "clusterIdentity": "seed-" + gardenerSeed, "provider": "aws", "region": "eu-west-1"},
		}
		return "extension-housekeeper-3c7a1", values
	}
	t.Fatalf("no rendering %q", name)
	return "", nil
}

var renderCache sync.Map // rendering → *chartrenderer.RenderedChart

// rendered renders the chart as gardenlet does (gardener's chart renderer, the chart archive).
func rendered(t *testing.T, name string) *chartrenderer.RenderedChart {
	t.Helper()
	if cached, ok := renderCache.Load(name); ok {
		return cached.(*chartrenderer.RenderedChart)
	}
	ns, values := variant(t, name)
	r, err := chart.Render(ns, values, kubeVersion(t))
	if err != nil {
		t.Fatalf("rendering the chart (%s): %v", name, err)
	}
	renderCache.Store(name, r)
	return r
}

// render is the objects of a rendering.
func render(t *testing.T, name string) []manifest {
	t.Helper()
	var objs []manifest
	for _, u := range decodeYAMLBytes(t, "chart ("+name+")", rendered(t, name).Manifest()) {
		objs = append(objs, manifest{source: "chart (" + name + ")", obj: u})
	}
	return objs
}

// renderedFiles are the chart's templates that rendered something, as templates/<file>.
func renderedFiles(t *testing.T, name string) []string {
	t.Helper()
	var files []string
	for _, m := range rendered(t, name).Manifests {
		if strings.TrimSpace(m.Content) != "" {
			files = append(files, strings.TrimPrefix(m.Name, chart.Name+"/"))
		}
	}
	return files
}

// kubeVersion is the Kubernetes version the tests run (scripts/versions.env).
func kubeVersion(t *testing.T) string {
	t.Helper()
	return versionsEnv(t, "..")["KUBERNETES_VERSION"]
}

// chartMetadata is infra/chart/Chart.yaml.
func chartMetadata(t *testing.T) (meta struct{ Version, AppVersion string }) {
	t.Helper()
	data, err := chart.FS.ReadFile("Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &meta); err != nil || meta.Version == "" || meta.AppVersion == "" {
		t.Fatalf("infra/chart/Chart.yaml: %v %+v", err, meta)
	}
	return meta
}

// registration is infra/gardener/controller-registration.yaml: housekeeper's
// ControllerRegistration and ControllerDeployment.
func registration(t *testing.T) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	t.Helper()
	reg, dep := &gardencorev1beta1.ControllerRegistration{}, &gardencorev1.ControllerDeployment{}
	for _, u := range decodeYAML(t, "gardener/controller-registration.yaml") {
		data, _ := json.Marshal(u.Object)
		var into any
		switch u.GetKind() {
		case "ControllerRegistration":
			into = reg
		case "ControllerDeployment":
			into = dep
		default:
			t.Fatalf("infra/gardener/controller-registration.yaml: unexpected %s", u.GetKind())
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatal(err)
		}
	}
	if reg.Name == "" || dep.Name == "" || dep.Helm == nil || dep.Helm.Values == nil {
		t.Fatal("infra/gardener/controller-registration.yaml lacks the registration, the deployment or its values")
	}
	return reg, dep
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
		"FlowSchema", "PriorityLevelConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
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

// installCRDs installs Knative Serving's and KEDA's CRDs from their released Go modules, and the
// Prometheus Operator's and the VPA's from the Gardener module (the ones seeds run).
func installCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	gardener := strings.TrimSpace(goOutput(t, "list", "-m", "-f", "{{.Dir}}", "github.com/gardener/gardener"))
	paths := []string{
		filepath.Join(moduleDir(t, knativeServingModule, knativeServingVersion), knativeServingCRDs),
		filepath.Join(moduleDir(t, kedaModule, kedaVersion(t)), kedaCRDs),
		filepath.Join(gardener, "pkg/component/observability/monitoring/prometheusoperator/templates/crd-monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(gardener, "pkg/component/observability/monitoring/prometheusoperator/templates/crd-monitoring.coreos.com_prometheusrules.yaml"),
		filepath.Join(gardener, "pkg/component/autoscaling/vpa/templates/crd-autoscaling.k8s.io_verticalpodautoscalers.yaml"),
	}
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: time.Minute})
	if err != nil {
		t.Fatalf("installing the CRDs from %v: %v", paths, err)
	}
	var names []string
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	for _, want := range []string{"services.serving.knative.dev", "scaledobjects.keda.sh", "podmonitors.monitoring.coreos.com",
		"prometheusrules.monitoring.coreos.com", "verticalpodautoscalers.autoscaling.k8s.io"} {
		if !slices.Contains(names, want) {
			t.Fatalf("CRD %s not among those installed from the modules: %v", want, names)
		}
	}
}

// moduleDir downloads module@version through the Go module proxy (or finds it in the module
// cache) and returns its directory.
// kedaVersion is the KEDA release test/keda/go.mod requires.
func kedaVersion(t *testing.T) string {
	t.Helper()
	v, err := stack.RequiredVersion(filepath.Join("..", "test", "keda", "go.mod"), kedaModule)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

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

// Each workload runs the image that links what it uses: the bridge its own, the functions
// and the setup the provider's image of the one cloud type served (the gardener rendering
// registers azure), the image of every provider otherwise.
func TestChartChoosesTheImageOfWhatIsServed(t *testing.T) {
	tag := ":v" + chartMetadata(t).AppVersion
	for rendering, functions := range map[string]string{
		"gardener": "ghcr.io/housekeeper-dev/housekeeper-azure" + tag,
		"keda":     "ghcr.io/housekeeper-dev/housekeeper" + tag, // azure, aws, gcp
		"knative":  "ghcr.io/housekeeper-dev/housekeeper" + tag,
		"local":    "ghcr.io/housekeeper-dev/housekeeper" + tag,
	} {
		seen := 0
		for _, m := range render(t, rendering) {
			for _, c := range containers(m.obj) {
				if !strings.Contains(c.Image, "housekeeper") {
					continue
				}
				want := functions
				if m.obj.GetName() == "housekeeper-bridge" {
					want = "ghcr.io/housekeeper-dev/housekeeper-bridge" + tag
				}
				if c.Image != want {
					t.Errorf("%s: container %s runs %s, want %s", m, c.Name, c.Image, want)
				}
				seen++
			}
		}
		if seen < 6 {
			t.Errorf("%s: %d housekeeper containers, want the bridge, setup and the functions", rendering, seen)
		}
	}
	// One type served: its own image, which the image builder makes for every implemented type.
	built := map[string]bool{}
	for _, d := range images.Deployables() {
		built[d.Name] = true
	}
	for _, typ := range gardener.ImplementedTypes {
		_, values := variant(t, "keda")
		values["types"] = []any{typ}
		if typ == "local" {
			values["local"] = map[string]any{"hostPath": "/var/lib/housekeeper-buckets"}
		}
		r, err := chart.Render(namespace, values, kubeVersion(t))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`image: ghcr.io/housekeeper-dev/(housekeeper[a-z-]*):v`).FindAllStringSubmatch(string(r.Manifest()), -1)
		for _, name := range m {
			if !built[name[1]] {
				t.Errorf("types [%s]: the chart runs image %s, which scripts/images does not build", typ, name[1])
			}
		}
		if len(m) == 0 {
			t.Errorf("types [%s]: no housekeeper image rendered", typ)
		}
	}
	_, values := variant(t, "keda")
	values["types"] = []any{"gcp"}
	values["image"] = map[string]any{"digests": map[string]any{"housekeeper-gcp": "sha256:" + strings.Repeat("ab", 32)}}
	r, err := chart.Render(namespace, values, kubeVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ghcr.io/housekeeper-dev/housekeeper-gcp@sha256:" + strings.Repeat("ab", 32); !strings.Contains(string(r.Manifest()), "image: "+want+"\n") {
		t.Errorf("a digest of image.digests is not what the functions run (want %s)", want)
	}
}

// With the local provider, the functions that open stores — the bucket, the entry (a purge due
// at once), the purge, the snapshot (a local BackupDestination), the drill and the copy — have its
// directory, as docker-compose.yaml gives it; the bridge and the schedule function do not.
func TestLocalBucketsGoToTheFunctionsThatOpenStores(t *testing.T) {
	want := functionsNeeding(func(n runner.Needs) bool { return n.Stores })
	var got []string
	for _, m := range render(t, "local") {
		if m.obj.GetKind() != "Deployment" {
			continue
		}
		fn := functionOf(m.obj)
		for _, c := range containers(m.obj) {
			if slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == "HOUSEKEEPER_LOCAL_ROOT" }) {
				got = append(got, fn)
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the local buckets' directory goes to %v, want %v", got, want)
	}
}
