package infra_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// What drill.liveShootEtcd adds to a rendering, and nothing else: the drill's
// --live-shoot-etcd and --pod-namespace (the release's namespace, where its pods run), its
// rights to get Etcds and to create and patch the NetworkPolicy it applies (by that name
// alone), and its egress to etcd-main's client port in the shoots' namespaces. Without it the
// rendering is the same but for those. The drill's pods carry the labels its policy admits. The
// registration (the "gardener" rendering) leaves it off. No CNI enforces the policies here: the
// test reads them as one would.
func TestDrillLiveShootEtcdValue(t *testing.T) {
	withValue := func(t *testing.T, name string, on bool) (string, []manifest) {
		t.Helper()
		ns, values := variant(t, name)
		d, _ := values["drill"].(map[string]any)
		if d == nil {
			d = map[string]any{}
		}
		d["liveShootEtcd"] = on
		values["drill"] = d
		r, err := chart.Render(ns, values, kubeVersion(t))
		if err != nil {
			t.Fatalf("rendering %s with drill.liveShootEtcd %t: %v", name, on, err)
		}
		var objs []manifest
		for _, u := range decodeYAMLBytes(t, name, r.Manifest()) {
			objs = append(objs, manifest{source: fmt.Sprintf("chart (%s, liveShootEtcd %t)", name, on), obj: u})
		}
		return ns, objs
	}
	policyName := drill.EtcdPolicyName(gardener.EtcdMain)
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"druid.gardener.cloud"}, Resources: []string{"etcds"}, Verbs: []string{"get"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, ResourceNames: []string{policyName}, Verbs: []string{"create", "patch"}},
	}
	isAdded := func(r rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(wantRules, func(w rbacv1.PolicyRule) bool { return reflect.DeepEqual(w, r) })
	}

	for _, name := range []string{"keda", "knative", "gardener"} {
		t.Run(name, func(t *testing.T) {
			ns, on := withValue(t, name, true)
			_, off := withValue(t, name, false)
			if name != "gardener" && !reflect.DeepEqual(objectsOf(render(t, name)), objectsOf(on)) {
				t.Errorf("the %s rendering is not the one with drill.liveShootEtcd on", name)
			}
			if name == "gardener" && !reflect.DeepEqual(objectsOf(render(t, name)), objectsOf(off)) {
				t.Errorf("the registration turns drill.liveShootEtcd on: it is the operator's choice")
			}
			var drillPods map[string]string
			var otherPods []map[string]string
			found := map[string]bool{}
			// stripped is on without the value's additions, to be compared with off.
			var stripped []manifest
			for _, m := range on {
				u := m.obj.DeepCopy()
				switch {
				case functionOf(u) == "drill":
					found["workload"] = true
					drillPods = podTemplateLabels(u)
					env := map[string]string{}
					for _, e := range containers(u)[0].Env {
						env[e.Name] = e.Value
					}
					if env["HOUSEKEEPER_LIVE_SHOOT_ETCD"] != "true" || env["HOUSEKEEPER_POD_NAMESPACE"] != ns {
						t.Errorf("%s: HOUSEKEEPER_LIVE_SHOOT_ETCD %q, HOUSEKEEPER_POD_NAMESPACE %q; want true and %s", m,
							env["HOUSEKEEPER_LIVE_SHOOT_ETCD"], env["HOUSEKEEPER_POD_NAMESPACE"], ns)
					}
					path := append(podSpecPath(u), "containers")
					cs, _, _ := unstructured.NestedSlice(u.Object, path...)
					c := cs[0].(map[string]any)
					c["env"] = slices.DeleteFunc(c["env"].([]any), func(e any) bool {
						n := e.(map[string]any)["name"]
						return n == "HOUSEKEEPER_LIVE_SHOOT_ETCD" || n == "HOUSEKEEPER_POD_NAMESPACE"
					})
					if err := unstructured.SetNestedSlice(u.Object, cs, path...); err != nil {
						t.Fatal(err)
					}
				case u.GetKind() == "ClusterRole" && u.GetName() == "housekeeper-drill":
					found["role"] = true
					var role rbacv1.ClusterRole
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
						t.Fatal(err)
					}
					for _, w := range wantRules {
						if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(w, r) }) {
							t.Errorf("%s: no rule %+v", m, w)
						}
					}
					rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
					kept := []any{}
					for i, r := range role.Rules {
						if !isAdded(r) {
							kept = append(kept, rules[i])
						}
					}
					u.Object["rules"] = kept
				case u.GetKind() == "NetworkPolicy" && u.GetName() == "housekeeper-drill-to-shoot-etcds":
					found["egress"] = true
					var np networkingv1.NetworkPolicy
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
						t.Fatal(err)
					}
					checkShootEtcdEgress(t, m.String(), np)
					continue
				default:
					if l := podTemplateLabels(u); l != nil {
						otherPods = append(otherPods, l)
					}
					for _, c := range containers(u) {
						for _, e := range c.Env {
							if e.Name == "HOUSEKEEPER_LIVE_SHOOT_ETCD" || e.Name == "HOUSEKEEPER_POD_NAMESPACE" {
								t.Errorf("%s: %s is the drill's alone", m, e.Name)
							}
						}
					}
				}
				stripped = append(stripped, manifest{source: m.source, obj: u})
			}
			if len(found) != 3 {
				t.Fatalf("found %v of the drill's workload, its role and its egress policy", slices.Sorted(maps.Keys(found)))
			}
			// The policy the drill applies admits its own pods, and the chart's egress is theirs.
			if !labels.SelectorFromSet(drill.DrillPodLabels).Matches(labels.Set(drillPods)) {
				t.Errorf("the drill's pods %v lack the labels %v its NetworkPolicy admits", drillPods, drill.DrillPodLabels)
			}
			for _, m := range on {
				if m.obj.GetName() != "housekeeper-drill-to-shoot-etcds" {
					continue
				}
				var np networkingv1.NetworkPolicy
				_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, &np)
				if !egressPorts([]networkingv1.NetworkPolicy{np}, drillPods)["TCP/2379"] {
					t.Errorf("%s does not select the drill's pods %v", m, drillPods)
				}
				for _, l := range otherPods {
					if egressPorts([]networkingv1.NetworkPolicy{np}, l)["TCP/2379"] {
						t.Errorf("%s selects pods %v that are not the drill's", m, l)
					}
				}
			}
			key := func(m manifest) string {
				return m.obj.GetKind() + " " + m.obj.GetNamespace() + "/" + m.obj.GetName()
			}
			offByKey := map[string]manifest{}
			for _, m := range off {
				offByKey[key(m)] = m
			}
			if len(stripped) != len(off) {
				t.Errorf("%d objects without the value, %d with it less the egress policy", len(off), len(stripped))
			}
			for _, m := range stripped {
				o, ok := offByKey[key(m)]
				switch {
				case !ok:
					t.Errorf("%s: only with the value", m)
				case !reflect.DeepEqual(o.obj.Object, m.obj.Object):
					t.Errorf("%s: differs without the value beyond the drill's flags and rules:\n%v\nwithout:\n%v", m, m.obj.Object, o.obj.Object)
				}
			}
		})
	}
}

func objectsOf(ms []manifest) []map[string]any {
	objs := make([]map[string]any, len(ms))
	for i, m := range ms {
		objs[i] = m.obj.Object
	}
	return objs
}

// checkShootEtcdEgress checks the chart's egress of the drill: to etcd-druid's etcd-main pods,
// in the namespaces Gardener labels as shoots', on TCP 2379 alone.
func checkShootEtcdEgress(t *testing.T, where string, np networkingv1.NetworkPolicy) {
	t.Helper()
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) || len(np.Spec.Egress) != 1 {
		t.Fatalf("%s: %+v, want one egress rule", where, np.Spec)
	}
	rule := np.Spec.Egress[0]
	if len(rule.To) != 1 || rule.To[0].NamespaceSelector == nil || rule.To[0].PodSelector == nil ||
		!maps.Equal(rule.To[0].NamespaceSelector.MatchLabels, map[string]string{"gardener.cloud/role": "shoot"}) ||
		!maps.Equal(rule.To[0].PodSelector.MatchLabels, map[string]string{"app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": "etcd-main"}) {
		t.Errorf("%s: to %+v, want etcd-druid's etcd-main pods in namespaces labelled gardener.cloud/role: shoot", where, rule.To)
	}
	if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.IntValue() != 2379 || rule.Ports[0].Protocol == nil || *rule.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("%s: ports %+v, want TCP 2379", where, rule.Ports)
	}
}

// The chart's drill role (drill.liveShootEtcd, the "keda" rendering) is enough for the drill
// function, as its ServiceAccount, to read a shoot's Etcd and apply its NetworkPolicy there
// (created the first time, patched after: a server-side apply that creates is authorized as a
// create of that name), and no more: a NetworkPolicy of another name is refused.
func TestDrillRBACAdmitsItselfToShootEtcds(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	testenv.InstallOpenCRD(ctx, t, admin, drill.EtcdKind, "etcds")
	c := serviceAccountClient(t, env, "drill")

	const shootNS = "shoot--dev--app"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNS, Labels: map[string]string{"gardener.cloud/role": "shoot"}}}); err != nil {
		t.Fatal(err)
	}
	etcd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"etcd": map[string]any{
		"clientPort": int64(2379),
		"clientUrlTls": map[string]any{
			"tlsCASecretRef":     map[string]any{"name": "ca-etcd-bundle-3f2a", "dataKey": "bundle.crt"},
			"clientTLSSecretRef": map[string]any{"name": "etcd-client-77ab"},
		},
	}}}}
	etcd.SetGroupVersionKind(drill.EtcdKind)
	etcd.SetNamespace(shootNS)
	etcd.SetName(gardener.EtcdMain)
	if err := admin.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}

	live := drill.ShootEtcdFrom(c, shootNS, gardener.EtcdMain, drill.Pods{Namespace: namespace, Labels: drill.DrillPodLabels})
	for _, attempt := range []string{"created", "patched"} {
		// The secrets are missing: the drill gets as far as reading them (its right), past the policy.
		_, _, err := live.Connect(ctx)
		if err == nil || !strings.Contains(err.Error(), "reading the secret "+shootNS+"/ca-etcd-bundle-3f2a") || apierrors.IsForbidden(err) {
			t.Fatalf("the policy %s as the drill's ServiceAccount: %v, want to reach the missing CA secret", attempt, err)
		}
		np := &networkingv1.NetworkPolicy{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: shootNS, Name: drill.EtcdPolicyName(gardener.EtcdMain)}, np); err != nil {
			t.Fatalf("the policy %s: %v", attempt, err)
		}
	}
	other := drill.EtcdPolicy(shootNS, "etcd-events", 2379, drill.Pods{Namespace: namespace, Labels: drill.DrillPodLabels})
	if err := c.Apply(ctx, other, client.FieldOwner(drill.PolicyFieldManager)); !apierrors.IsForbidden(err) {
		t.Errorf("the drill's ServiceAccount applying the NetworkPolicy %s: %v, want forbidden", *other.Name, err)
	}
}
