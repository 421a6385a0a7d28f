package infra_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// A wrong value fails the install, naming it: infra/chart/values.schema.json, which Helm checks
// on install, upgrade and template, and gardener's chart renderer (Render, gardenlet) too. A
// key the chart does not know — a typo — is refused, however deep; so is a value of the wrong
// type or outside its enum. gardenlet's own .Values.gardener (and usablePorts), and Helm's
// global, are left open.
func TestChartSchemaRefusesWrongValuesByName(t *testing.T) {
	base := func() map[string]any { return map[string]any{"cluster": "seed-1", "types": []any{"azure"}} }
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"a typo in a function's setting", func(v map[string]any) {
			v["functions"] = map[string]any{"bucket": map[string]any{"polingInterval": 5}}
		}, "at '/functions/bucket': additional properties 'polingInterval' not allowed"},
		{"a typo in a function's name", func(v map[string]any) {
			v["functions"] = map[string]any{"bukcet": map[string]any{"pollingInterval": 5}}
		}, "at '/functions': additional properties 'bukcet' not allowed"},
		{"a typo at the top", func(v map[string]any) { v["crd"] = map[string]any{"install": false} }, "at '': additional properties 'crd' not allowed"},
		{"a typo in a switch", func(v map[string]any) { v["etcdBackupConfig"] = map[string]any{"enable": false} },
			"at '/etcdBackupConfig': additional properties 'enable' not allowed"},
		{"a number as a string", func(v map[string]any) { v["stream"] = map[string]any{"replicas": "3"} }, "at '/stream/replicas': got string, want integer"},
		{"a switch as a string", func(v map[string]any) { v["vpa"] = map[string]any{"enabled": "yes"} }, "at '/vpa/enabled': got string, want boolean"},
		{"a function's number as a string", func(v map[string]any) {
			v["functions"] = map[string]any{"purge": map[string]any{"maxReplicas": "2"}}
		}, "at '/functions/purge/maxReplicas': got string, want integer"},
		{"more stream replicas than NATS keeps", func(v map[string]any) { v["stream"] = map[string]any{"replicas": 7} }, "at '/stream/replicas': maximum"},
		{"an unknown log level", func(v map[string]any) { v["log"] = map[string]any{"level": "verbose"} }, "at '/log/level': value must be one of"},
		{"an unknown pull policy", func(v map[string]any) { v["image"] = map[string]any{"pullPolicy": "Sometimes"} }, "at '/image/pullPolicy': value must be one of"},
		{"a digest of an image that is not built", func(v map[string]any) {
			v["image"] = map[string]any{"digests": map[string]any{"housekeeper-azrue": digest}}
		}, "at '/image/digests': additional properties 'housekeeper-azrue' not allowed"},
		{"a digest that is no digest", func(v map[string]any) {
			v["image"] = map[string]any{"digests": map[string]any{"housekeeper-azure": "latest"}}
		}, "at '/image/digests/housekeeper-azure'"},
		{"an unknown extension class", func(v map[string]any) { v["classes"] = []any{"shot"} }, "at '/classes/0': value must be one of 'shoot', 'garden', 'seed'"},
		{"no extension class", func(v map[string]any) { v["classes"] = []any{} }, "at '/classes': minItems"},
		{"a type twice", func(v map[string]any) { v["types"] = []any{"azure", "azure"} }, "at '/types': items at 0 and 1 are equal"},
		{"a port out of range", func(v map[string]any) { v["networkPolicy"] = map[string]any{"apiServerPorts": []any{0}} },
			"at '/networkPolicy/apiServerPorts/0': minimum"},
		{"a retention in days", func(v map[string]any) { v["retention"] = map[string]any{"default": "7d"} }, "at '/retention/default': '7d' does not match pattern"},
		{"a purpose the retention flag cannot carry", func(v map[string]any) {
			v["retention"] = map[string]any{"byPurpose": map[string]any{"production=x": "1h"}}
		}, "at '/retention/byPurpose': additional properties 'production=x' not allowed"},
		{"a purpose's retention in days", func(v map[string]any) {
			v["retention"] = map[string]any{"byPurpose": map[string]any{"production": "7d"}}
		}, "at '/retention/byPurpose/production'"},
		{"a cluster name that is no seed name", func(v map[string]any) { v["cluster"] = "Seed_1" }, "at '/cluster': 'Seed_1' does not match pattern"},
		{"a relative hostPath", func(v map[string]any) { v["local"] = map[string]any{"hostPath": "buckets"} }, "at '/local/hostPath'"},
		{"no NATS URL", func(v map[string]any) { v["nats"] = map[string]any{"url": ""} }, "at '/nats/url': minLength"},
		{"a Knative flag's unknown state", func(v map[string]any) {
			v["knative"] = map[string]any{"features": map[string]any{"kubernetes.podspec-priorityclassname": "on"}}
		}, "at '/knative/features/kubernetes.podspec-priorityclassname': value must be one of"},
		{"a section removed", func(v map[string]any) { v["nats"] = nil }, "at '': missing property 'nats'"},
	} {
		v := base()
		tc.change(v)
		_, err := chart.Render(namespace, v, kubeVersion(t))
		if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: render error %v, want the schema's, containing %q", tc.name, err, tc.want)
		}
	}

	// As gardenlet renders it: the ControllerDeployment's values, and what gardenlet adds.
	_, values := variant(t, "gardener")
	values["vpa"] = map[string]any{"enable": true}
	if _, err := chart.Render("extension-housekeeper-3c7a1", values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), "at '/vpa': additional properties 'enable' not allowed") {
		t.Errorf("a typo in the ControllerDeployment's values: render error %v, want the schema's naming vpa.enable", err)
	}
	for what, change := range map[string]func(map[string]any){
		"gardenlet's values": func(v map[string]any) {
			v["gardener"] = map[string]any{"version": "v1.150.0", "garden": map[string]any{"clusterIdentity": "garden", "genericKubeconfigSecretName": "x"},
				"seed": map[string]any{"name": "aws-eu1", "labels": map[string]any{"a": "b"}, "spec": map[string]any{"provider": map[string]any{"type": "aws"}},
					"taints": []any{}, "protected": false, "volumeProviders": nil},
				"gardenlet": map[string]any{"featureGates": map[string]any{}}}
			v["usablePorts"] = []any{10250, 10251}
		},
		"Helm's global values": func(v map[string]any) { v["global"] = map[string]any{"imageRegistry": "example.com"} },
		"every image's digest": func(v map[string]any) {
			digests := map[string]any{}
			for _, name := range []string{"housekeeper-bridge", "housekeeper", "housekeeper-aws", "housekeeper-azure", "housekeeper-gcp", "housekeeper-openstack"} {
				digests[name] = digest
			}
			v["image"] = map[string]any{"digests": digests}
		},
	} {
		v := base()
		change(v)
		if _, err := chart.Render(namespace, v, kubeVersion(t)); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// helm install reads the schema from the chart archive, as gardenlet does.
	if !slices.Contains(archiveFiles(t), chart.Name+"/values.schema.json") {
		t.Error("the chart archive has no values.schema.json")
	}
}

// values.schema.json describes values.yaml, no more and no less: every value of values.yaml has
// its property, every property (but gardenlet's and Helm's) a value in values.yaml, and every
// object whose keys the chart owns refuses others (additionalProperties: false); only maps of
// names the operator chooses (labels, digests, purposes, Knative flags, resources) take any key.
func TestChartSchemaCoversTheValues(t *testing.T) {
	var values, schema map[string]any
	data, err := chart.FS.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	data, err = chart.FS.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	definitions, _ := schema["definitions"].(map[string]any)
	resolve := func(path string, s map[string]any) map[string]any {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		name, _ := strings.CutPrefix(ref, "#/definitions/")
		def, ok := definitions[name].(map[string]any)
		if !ok {
			t.Errorf("%s: $ref %s is none of the schema's definitions", path, ref)
			return map[string]any{}
		}
		return def
	}
	var walk func(path string, values map[string]any, schema map[string]any)
	walk = func(path string, values map[string]any, schema map[string]any) {
		schema = resolve(path, schema)
		props, owned := schema["properties"].(map[string]any)
		if !owned {
			if _, ok := schema["additionalProperties"]; !ok && path != "" {
				t.Errorf("%s: the schema neither lists its keys nor says what any key holds", path)
			}
			return
		}
		if schema["additionalProperties"] != false {
			t.Errorf("%s: the schema lists its keys but takes others (additionalProperties %v)", path, schema["additionalProperties"])
		}
		for key, v := range values {
			p, ok := props[key].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: in values.yaml, not in the schema", path, key)
				continue
			}
			if m, ok := v.(map[string]any); ok {
				walk(path+"."+key, m, p)
			}
		}
		for key := range props {
			if _, ok := values[key]; !ok && !(path == "" && slices.Contains([]string{"gardener", "usablePorts", "global"}, key)) {
				t.Errorf("%s.%s: in the schema, not in values.yaml", path, key)
			}
		}
	}
	walk("", values, schema)
	if s, _ := schema["$schema"].(string); s != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema %q: draft-07, which every Helm 3 and 4 validates", s)
	}
}

// housekeeper's CRDs outlive the chart: deleting a CRD deletes every EtcdBackupConfig and
// BackupDestination with it. helm keeps a resource annotated helm.sh/resource-policy: keep on
// uninstall (and on an upgrade that no longer renders it); gardenlet installs the chart as a
// ManagedResource (without keepObjects), whose objects gardener-resource-manager deletes when
// the ManagedResource goes or no longer lists them, except those annotated
// resources.gardener.cloud/keep-object: "true" (gardener's constant).
func TestChartKeepsItsCRDs(t *testing.T) {
	for _, name := range renderings {
		crds := 0
		for _, m := range render(t, name) {
			if m.obj.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crds++
			a := m.obj.GetAnnotations()
			if a["helm.sh/resource-policy"] != "keep" || a[resourcesv1alpha1.KeepObject] != "true" {
				t.Errorf("%s: annotations %v, want helm.sh/resource-policy: keep and %s: \"true\"", m, a, resourcesv1alpha1.KeepObject)
			}
			if a["controller-gen.kubebuilder.io/version"] == "" {
				t.Errorf("%s: the generated annotations are lost: %v", m, a)
			}
		}
		if crds != 4 {
			t.Errorf("%s: %d CRDs, want BackupDestination, EtcdBackupConfig, RestoreDrill and BackupCopyPolicy", name, crds)
		}
	}
}

// etcdBackupConfig.enabled false takes the EtcdBackupConfig feature out: its functions (schedule,
// snapshot, and drill, RestoreDrill's, whose CRD comes with the feature's) with their Deployments, ScaledObjects or Services, ServiceAccounts, ClusterRoles —
// snapshot's reads secrets in every namespace — and VPAs, their consumers (the setup Job's
// --functions, the forwarder's --function), their place in the FlowSchema and the Knative
// NetworkPolicy, and the CRDs. Nothing else changes; the bridge keeps list and watch on
// EtcdBackupConfigs and RestoreDrills, as the CRDs outlive the feature.
func TestEtcdBackupConfigFeatureCanBeTurnedOff(t *testing.T) {
	feature := all.NamesOf(slices.Concat(all.EtcdBackup, all.Drill, all.Copy))
	gardener := strings.Join(slices.Sorted(slices.Values(all.NamesOf(all.Gardener))), ",")
	isFeatures := func(u *unstructured.Unstructured) bool {
		// Its functions' objects, and the NetworkPolicies of one of them (housekeeper-drill-...).
		return u.GetKind() == "CustomResourceDefinition" || slices.ContainsFunc(feature, func(fn string) bool {
			return u.GetName() == "housekeeper-"+fn || u.GetKind() == "NetworkPolicy" && strings.HasPrefix(u.GetName(), "housekeeper-"+fn+"-")
		})
	}
	for _, mode := range []string{"keda", "knative"} {
		ns, values := variant(t, mode)
		values["etcdBackupConfig"] = map[string]any{"enabled": false}
		r, err := chart.Render(ns, values, kubeVersion(t))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var off []manifest
		for _, u := range decodeYAMLBytes(t, mode+" without EtcdBackupConfigs", r.Manifest()) {
			off = append(off, manifest{source: "chart (" + mode + ", etcdBackupConfig.enabled false)", obj: u})
		}
		checkDeployable(t, off, ns)

		ids := func(objs []manifest, leaveOut func(*unstructured.Unstructured) bool) []string {
			var out []string
			for _, m := range objs {
				if leaveOut(m.obj) {
					continue
				}
				id := identity(m.obj)
				if strings.HasPrefix(id, "Job.batch/housekeeper-setup-") {
					id = "Job.batch/housekeeper-setup-*" // named by what it runs
				}
				out = append(out, id)
			}
			slices.Sort(out)
			return out
		}
		if got, want := ids(off, func(*unstructured.Unstructured) bool { return false }), ids(render(t, mode), isFeatures); !slices.Equal(got, want) {
			t.Errorf("%s: renders %v, want the default rendering without the feature's objects: %v", mode, got, want)
		}

		for _, m := range off {
			o := m.obj
			switch o.GetKind() {
			case "ClusterRole":
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, raw := range rules {
					var rule struct{ APIGroups, Resources, Verbs []string }
					data, _ := json.Marshal(raw)
					_ = json.Unmarshal(data, &rule)
					if !slices.Contains(rule.APIGroups, "backup.housekeeper.dev") && !slices.Contains(rule.APIGroups, "*") {
						continue
					}
					// What stays with the feature off: the bridge's lists (the CRDs outlive the
					// feature), and the entry's and the purge's reads of the copies made while it
					// was on, which are purged with their entries all the same.
					kept := o.GetName() == "housekeeper-bridge" && slices.Equal(rule.Resources, []string{"etcdbackupconfigs", "restoredrills", "backupcopypolicies"}) && slices.Equal(rule.Verbs, []string{"list", "watch"})
					for _, fn := range []string{entry.Definition.Name, entry.PurgeDefinition.Name} {
						kept = kept || o.GetName() == "housekeeper-"+fn && (slices.Equal(rule.Resources, []string{"backupcopypolicies"}) && slices.Equal(rule.Verbs, []string{"list", "watch"}) ||
							slices.Equal(rule.Resources, []string{"backupdestinations"}) && slices.Equal(rule.Verbs, []string{"get"}))
					}
					if !kept {
						t.Errorf("%s: grants %v on %v of backup.housekeeper.dev", m, rule.Verbs, rule.Resources)
					}
				}
			case "FlowSchema", "NetworkPolicy":
				text, _ := json.Marshal(o.Object)
				for _, fn := range feature {
					if strings.Contains(string(text), `"`+fn+`"`) || strings.Contains(string(text), "housekeeper-"+fn) {
						t.Errorf("%s names the %s function", m, fn)
					}
				}
			}
			for _, c := range containers(o) {
				if len(c.Args) > 0 && (c.Args[0] == "setup" || c.Args[0] == "forward") {
					flag := map[string]string{"setup": "--functions", "forward": "--function"}[c.Args[0]]
					if i := slices.Index(c.Args, flag); i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != gardener {
						t.Errorf("%s: %s %q, want %s %s", m, c.Args[0], c.Args, flag, gardener)
					}
				}
			}
		}
	}

	// On by default, as infra/docs/configuration.md presents the feature: its functions and CRDs are rendered.
	objs := render(t, "keda")
	for _, want := range []string{"ClusterRole.rbac.authorization.k8s.io/housekeeper-snapshot", "ScaledObject.keda.sh/housekeeper-schedule",
		"CustomResourceDefinition.apiextensions.k8s.io/backupdestinations.backup.housekeeper.dev"} {
		if !slices.ContainsFunc(objs, func(m manifest) bool { return identity(m.obj) == want }) {
			t.Errorf("the default rendering lacks %s", want)
		}
	}
}

// archiveFiles lists the files of the chart archive (chart.Archive, what helm package writes).
func archiveFiles(t *testing.T) []string {
	t.Helper()
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
	}
}

// Under gardenlet, gardener-resource-manager judges the ManagedResource's objects, and a
// function Deployment KEDA scales between zero and some is, for moments, not Available or still
// has a terminating pod: the ControllerInstallation would flap unhealthy on every event
// (test/seed shows it on a node). The functions carry gardener's skip-health-check; the bridge
// and everything else stay judged, and outside a seed nothing carries it.
func TestOnlyScaledFunctionsSkipTheHealthCheck(t *testing.T) {
	for _, name := range renderings {
		skipped := 0
		for _, m := range render(t, name) {
			skip := m.obj.GetAnnotations()[resourcesv1alpha1.SkipHealthCheck] == "true"
			function := m.obj.GetKind() == "Deployment" && m.obj.GetLabels()["app.kubernetes.io/component"] != "bridge"
			want := name == "gardener" && function
			if skip != want {
				t.Errorf("%s: %s annotation %v, want %v", m, resourcesv1alpha1.SkipHealthCheck, skip, want)
			}
			if skip {
				skipped++
			}
		}
		if name == "gardener" && skipped == 0 {
			t.Errorf("%s: no function Deployment rendered to check", name)
		}
	}
}

// The drill function refuses a run whose memoryBudget is above its container's memory limit
// less drill.ProcessMemoryReserve: the chart's limit holds a RestoreDrill of the default budget.
func TestChartDrillMemoryHoldsTheDefaultBudget(t *testing.T) {
	functions, _ := chartValues(t)["functions"].(map[string]any)
	d, _ := functions["drill"].(map[string]any)
	resources, _ := d["resources"].(map[string]any)
	limits, _ := resources["limits"].(map[string]any)
	s, _ := limits["memory"].(string)
	limit, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("functions.drill.resources.limits.memory %q: %v", s, err)
	}
	budget := resource.MustParse(backupv1alpha1.DefaultDrillMemoryBudget)
	if room := limit.Value() - drill.ProcessMemoryReserve; room < budget.Value() {
		t.Errorf("functions.drill.resources.limits.memory %s leaves the drills %d bytes, less than the default memoryBudget %s", s, room, backupv1alpha1.DefaultDrillMemoryBudget)
	}
}
