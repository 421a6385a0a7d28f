package infra_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// What each workload reaches besides NATS: every one resolves names; the bridge and the
// functions read and write the Kubernetes API; what opens object stores reaches them (entry
// too: it purges an entry due when it is deleted). setup talks to NATS only; so does the
// forwarder, but for Knative's gateway in knative mode (knative.gateway, test/knative).
var (
	apiClients  = append([]string{"bridge"}, functionsNeeding(func(n runner.Needs) bool { return n.APIServer })...)
	storeOpener = functionsNeeding(func(n runner.Needs) bool { return n.Stores })
)

// In a seed, Gardener's NetworkPolicy controller allows DNS, the API server and public networks
// to pods labelled for them, and the chart labels each pod for what it reaches. Installed by
// hand, nobody reads those labels: the chart's own policies must let each pod reach them, or a
// cluster that enforces policies cuts the pods off from DNS, the API server and the stores.
func TestNetworkPoliciesLetEachPodReachWhatItNeeds(t *testing.T) {
	for _, name := range renderings {
		t.Run(name, func(t *testing.T) {
			objs := render(t, name)
			var policies []networkingv1.NetworkPolicy
			for _, m := range objs {
				if m.obj.GetKind() == "NetworkPolicy" {
					var np networkingv1.NetworkPolicy
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, &np); err != nil {
						t.Fatal(err)
					}
					policies = append(policies, np)
				}
			}
			if len(policies) == 0 {
				t.Fatal("no NetworkPolicy rendered: nothing to check")
			}
			pods := 0
			for _, m := range objs {
				component := m.obj.GetLabels()["app.kubernetes.io/component"]
				podLabels := podTemplateLabels(m.obj)
				if podLabels == nil {
					continue
				}
				pods++
				want := []string{"TCP/4222", "TCP/53", "UDP/53"}
				if slices.Contains(apiClients, component) {
					want = append(want, "TCP/443", "TCP/6443")
				}
				if slices.Contains(storeOpener, component) {
					want = append(want, "TCP/443")
				}
				if name == "gardener" {
					// Gardener's own policies, by label; the chart adds NATS.
					gardener := map[string]bool{"TCP/53": podLabels["networking.gardener.cloud/to-dns"] == "allowed",
						"UDP/53":   podLabels["networking.gardener.cloud/to-dns"] == "allowed",
						"TCP/443":  podLabels["networking.gardener.cloud/to-runtime-apiserver"] == "allowed" || podLabels["networking.gardener.cloud/to-public-networks"] == "allowed",
						"TCP/6443": podLabels["networking.gardener.cloud/to-runtime-apiserver"] == "allowed"}
					if slices.Contains(storeOpener, component) && podLabels["networking.gardener.cloud/to-public-networks"] != "allowed" {
						t.Errorf("%s: opens object stores without the label networking.gardener.cloud/to-public-networks", m)
					}
					allowed := egressPorts(policies, podLabels)
					for _, p := range want {
						if !allowed[p] && !gardener[p] {
							t.Errorf("%s: neither the chart nor Gardener's labels let it reach %s", m, p)
						}
					}
					continue
				}
				allowed := egressPorts(policies, podLabels)
				for _, p := range want {
					if !allowed[p] {
						t.Errorf("%s: the chart's NetworkPolicies let it reach %v, not %s", m, slices.Sorted(maps.Keys(allowed)), p)
					}
				}
			}
			if pods == 0 {
				t.Fatal("no pod template rendered: nothing checked")
			}
		})
	}
}

// podTemplateLabels are the labels of u's pods, nil if u has none.
func podTemplateLabels(u *unstructured.Unstructured) map[string]string {
	path := podSpecPath(u)
	if path == nil {
		return nil
	}
	l, _, _ := unstructured.NestedStringMap(u.Object, append(path[:len(path)-1], "metadata", "labels")...)
	return l
}

// egressPorts are the "PROTO/port" a pod with podLabels may reach under policies.
func egressPorts(policies []networkingv1.NetworkPolicy, podLabels map[string]string) map[string]bool {
	allowed := map[string]bool{}
	for _, np := range policies {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
		if !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, rule := range np.Spec.Egress {
			for _, p := range rule.Ports {
				proto := "TCP"
				if p.Protocol != nil {
					proto = string(*p.Protocol)
				}
				allowed[fmt.Sprintf("%s/%s", proto, p.Port.String())] = true
			}
		}
	}
	return allowed
}
