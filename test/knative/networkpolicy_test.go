package knative_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"knative.dev/serving/pkg/networking"
	revresources "knative.dev/serving/pkg/reconciler/revision/resources"
)

// Knative's data plane reaches the functions' pods through the chart's NetworkPolicies: the pods
// Knative's revision reconciler makes (its Deployment of each Revision) carry queue-proxy, which
// takes the requests on its serving port from Knative's activator (in the request path while the
// revision scales from zero, and whenever the burst capacity is short) or the networking layer,
// and whose autoscaling metrics Knative's autoscaler scrapes. Knative Serving's released
// Deployments (in knative-serving) are the senders.
func TestKnativeReachesTheFunctionsPods(t *testing.T) {
	activator, autoscaler := releasedPodLabels(t, "activator"), releasedPodLabels(t, "autoscaler")
	knativeNS := map[string]string{corev1.LabelMetadataName: knativeNamespace}
	for _, r := range renderings() {
		t.Run(r.name, func(t *testing.T) {
			out, err := render(t, r)
			if err != nil {
				t.Skipf("the chart refuses the rendering (TestKnativeAdmitsEveryService judges it): %v", err)
			}
			var policies []networkingv1.NetworkPolicy
			for _, u := range out.objects {
				if u.GetKind() == "NetworkPolicy" {
					var np networkingv1.NetworkPolicy
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
						t.Fatal(err)
					}
					policies = append(policies, np)
				}
			}
			if len(policies) == 0 {
				t.Skip("renders no NetworkPolicy")
			}
			c := newCluster(t, features(out.values))
			for _, svc := range out.services() {
				a := c.admit(t, svc)
				if a.Refused != "" {
					continue // TestKnativeAdmitsEveryService reports it
				}
				d := c.derive(t, a.Object)
				pod := d.Deployment.Spec.Template
				ports := map[int32]bool{}
				for _, ctr := range pod.Spec.Containers {
					if ctr.Name == revresources.QueueContainerName {
						for _, p := range ctr.Ports {
							ports[p.ContainerPort] = true
						}
					}
				}
				for _, flow := range []struct {
					who    string
					labels map[string]string
					port   int32
					what   string
				}{
					{"activator", activator, networking.BackendHTTPPort, "the events (queue-proxy's serving port)"},
					{"autoscaler", autoscaler, networking.AutoscalingQueueMetricsPort, "the concurrency it scales on (queue-proxy's autoscaling metrics)"},
				} {
					if !ports[flow.port] {
						t.Fatalf("Knative's Deployment %s: queue-proxy does not listen on %d", d.Deployment.Name, flow.port)
					}
					if !ingressAllowed(policies, d.Deployment.Namespace, pod.Labels, knativeNS, flow.labels, flow.port) {
						t.Errorf("%s: the chart's NetworkPolicies deny Knative's %s (%s, app=%s) TCP %d to the pods of Knative's Deployment %s: %s never arrive",
							svc.GetName(), flow.who, knativeNamespace, flow.labels["app"], flow.port, d.Deployment.Name, flow.what)
					}
				}
			}
		})
	}
}

// ingressAllowed says whether NetworkPolicies let a pod (from a namespace and its labels) reach a
// pod of namespace with podLabels on TCP port: Kubernetes' semantics (a pod selected by no
// ingress policy takes everything; one selected takes the union of the selecting rules).
// IP blocks and named ports are not evaluated (counted as not matching).
func ingressAllowed(policies []networkingv1.NetworkPolicy, namespace string, podLabels, fromNamespace, fromPod map[string]string, port int32) bool {
	isolated := false
	for _, np := range policies {
		if np.Namespace != namespace || !hasIngress(np) || !matches(&np.Spec.PodSelector, podLabels) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			if portMatches(rule.Ports, port) && peerMatches(rule.From, namespace, fromNamespace, fromPod) {
				return true
			}
		}
	}
	return !isolated
}

func hasIngress(np networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return true
	}
	for _, pt := range np.Spec.PolicyTypes {
		if pt == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

func matches(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(set))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type != 0 { // named
			continue
		}
		lo, hi := p.Port.IntVal, p.Port.IntVal
		if p.EndPort != nil {
			hi = *p.EndPort
		}
		if port >= lo && port <= hi {
			return true
		}
	}
	return false
}

func peerMatches(peers []networkingv1.NetworkPolicyPeer, namespace string, fromNamespace, fromPod map[string]string) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			continue
		}
		nsOK := p.NamespaceSelector == nil && fromNamespace[corev1.LabelMetadataName] == namespace ||
			p.NamespaceSelector != nil && matches(p.NamespaceSelector, fromNamespace)
		podOK := p.PodSelector == nil || matches(p.PodSelector, fromPod)
		if nsOK && podOK {
			return true
		}
	}
	return false
}
