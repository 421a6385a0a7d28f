package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// TestNodeNetworkPolicies runs a node with its NetworkPolicy enforcer and checks, by what pods
// observe, that policies are enforced: an ingress policy keeps out a pod it does not select and
// lets it in once it does; a default-deny egress policy cuts a pod off from DNS and the API
// server; a policy allowing port 53 (UDP and TCP) lets it resolve a Service's name again; one
// allowing 443 does not let it reach the API server through the `kubernetes` Service (kube-proxy
// has translated the connection to the API server's real port before any policy sees it); one
// allowing Node.APIServerPort does. And a stopped node leaves nothing on the host.
func TestNodeNetworkPolicies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the node needs root (network and mount namespaces, cgroups, iptables): run the tests as root")
	}
	logFile := componentLogs(t)
	kube, err := stack.StartKube(logFile("kube-apiserver"), stack.ForNode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
		}
	})
	before := snapshotHost(t)

	nodeDir := t.TempDir()
	start := time.Now()
	node, err := stack.StartNode(kube, stack.NodeOptions{Dir: nodeDir, Logs: logFile, NetworkPolicies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s with its NetworkPolicy enforcer started in %s (HostIP %s, the API server on port %d)",
		node.Name, time.Since(start).Round(time.Millisecond), node.HostIP, node.APIServerPort)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = node.Stop()
		}
	})
	if !node.NetworkPolicies {
		t.Error("Node.NetworkPolicies = false, want true")
	}
	if node.APIServerPort == 0 || node.APIServerPort == 443 {
		t.Errorf("Node.APIServerPort = %d: not envtest's port", node.APIServerPort)
	}
	if u, err := url.Parse(kube.Config.Host); err != nil || u.Port() != strconv.Itoa(node.APIServerPort) {
		t.Errorf("Node.APIServerPort = %d, but the API server serves at %s", node.APIServerPort, kube.Config.Host)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := node.ImportImages(buildProbeImage(t, ctx)); err != nil {
		t.Fatal(err)
	}
	c := node.Client()
	const ns = "netpol-test"
	mustCreate(t, func() error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	// The default ServiceAccount (kube-controller-manager) before pods that mount its token.
	if err := stack.Poll(time.Minute, 100*time.Millisecond, "the default ServiceAccount of "+ns, func() (bool, string, error) {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"server", "client"} {
		mustCreate(t, func() error { return createProbePod(ctx, c, ns, name) })
	}
	mustCreate(t, func() error {
		_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "server"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "server"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	server := awaitReadyPod(t, ctx, c, ns, "app=server", "", 2*time.Minute)
	client := awaitReadyPod(t, ctx, c, ns, "app=client", "", 2*time.Minute)
	t.Logf("pods ready: server %s, client %s", server.Status.PodIP, client.Status.PodIP)

	// The client pod is asked over HTTP from here to make its requests; no policy judges those
	// (none selects it for ingress).
	probe := &podProbe{t: t, base: "http://" + net.JoinHostPort(client.Status.PodIP, "8080")}
	serviceName := "server." + ns + ".svc.cluster.local." // absolute: one query, no search list
	resolveUDP := "/resolve?name=" + url.QueryEscape(serviceName)
	resolveTCP := resolveUDP + "&tcp=1"
	fetchServer := "/fetch?url=" + url.QueryEscape("http://"+strings.TrimSuffix(serviceName, ".")+"/")
	whoami := "/whoami"
	me := "system:serviceaccount:" + ns + ":default"

	// No policy: everything goes.
	probe.awaitOK(resolveUDP, "")
	probe.awaitOK(resolveTCP, "")
	probe.awaitOK(whoami, me)
	probe.awaitOK(fetchServer, "hello from server")
	serverAddr := net.JoinHostPort(server.Status.PodIP, "8080")
	if err := dial(serverAddr); err != nil {
		t.Fatalf("the host cannot reach the server pod at %s before any policy: %v", serverAddr, err)
	}

	// Ingress: only pods labelled access=granted reach the server, on 8080.
	createPolicy(t, ctx, c, ns, "server-ingress", "server", networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"access": "granted"}}}},
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 8080)},
		}},
	})
	probe.awaitDenied(fetchServer, "the client pod, not selected by the server's ingress policy, to be kept out")
	// Nor does the host get in: it is outside the cluster, which no `from` selector matches.
	if err := dial(serverAddr); err == nil {
		t.Errorf("the host connected to the server pod at %s through its ingress policy (from: access=granted pods only)", serverAddr)
	} else {
		t.Logf("the host is kept out of the server pod too: %v", err)
	}
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, client.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"access":"granted"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	probe.awaitOK(fetchServer, "hello from server")
	// The kubelet's readiness probes (root in the node) were never judged: the server stays Ready.
	awaitReadyPod(t, ctx, c, ns, "app=server", "", 10*time.Second)

	// Egress: the client pod may open no connection at all.
	createPolicy(t, ctx, c, ns, "client-deny-egress", "client", networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
	})
	probe.awaitDenied(resolveUDP, "default-deny egress to cut the client pod off from DNS")
	probe.awaitDenied(whoami, "default-deny egress to cut the client pod off from the API server")
	probe.denied(resolveTCP, "DNS over TCP under default-deny egress")

	// Port 443, as to the `kubernetes` Service, and DNS: ports only, no `to` (so any destination,
	// hosts included), as the chart's policies are written.
	createPolicy(t, ctx, c, ns, "client-to-443", "client", egressToPorts(port(corev1.ProtocolTCP, 443)))
	createPolicy(t, ctx, c, ns, "client-to-dns", "client", egressToPorts(port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53)))
	// The enforcer sees policies in the order they were written: once DNS goes through, it knows
	// the policy for 443 too.
	probe.awaitOK(resolveUDP, "")
	probe.ok(resolveTCP, "")
	probe.denied(whoami, "the API server with only TCP 443 allowed: the connection is judged at "+
		net.JoinHostPort(node.HostIP, strconv.Itoa(node.APIServerPort))+", after kube-proxy's translation")
	probe.denied(fetchServer, "the server (8080) with only 53 and 443 allowed")

	createPolicy(t, ctx, c, ns, "client-to-apiserver", "client", egressToPorts(port(corev1.ProtocolTCP, node.APIServerPort)))
	probe.awaitOK(whoami, me)

	// The enforcer's table and queue are the node's, not the host's.
	now := snapshotHost(t)
	if strings.Contains(now["nftables"], "kube-network-policies") {
		t.Errorf("the enforcer's nftables table is in the host's network namespace: %s", now["nftables"])
	}
	stopped = true
	stopAndCheckHost(t, node, nodeDir, before)
}

// componentLogs gives StartKube and StartNode a log file a component in a directory that is
// removed when the test passes, and whose logs' ends are printed when it fails.
func componentLogs(t *testing.T) func(string) io.Writer {
	logDir, err := os.MkdirTemp("", "housekeeper-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, logDir)
			t.Logf("component logs kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})
	return func(name string) io.Writer {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
}

// createProbePod creates a pod of the probe's server, labelled app=name.
func createProbePod(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	_, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           probeImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"serve"},
				Env:             []corev1.EnvVar{{Name: "POD_NAME", Value: name}},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}, metav1.CreateOptions{})
	return err
}

func createPolicy(t *testing.T, ctx context.Context, c kubernetes.Interface, ns, name, app string, spec networkingv1.NetworkPolicySpec) {
	t.Helper()
	spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	mustCreate(t, func() error {
		_, err := c.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		return err
	})
	t.Logf("NetworkPolicy %s created", name)
}

func port(protocol corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(int32(n))
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &p}
}

// egressToPorts allows egress to ports, to any destination (no `to`).
func egressToPorts(ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: ports}},
	}
}

// dial opens a TCP connection to addr from the host.
func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// podProbe asks the probe's server in a pod to make a request: 200 when the pod's own request
// succeeded, 502 (with its error) when it failed.
type podProbe struct {
	t    *testing.T
	base string
}

// ask returns the probe's status and body; an error when the probe itself is not reached.
func (p *podProbe) ask(path string) (int, string, error) {
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.base + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// ok checks that the pod's request succeeds now, with want in its answer.
func (p *podProbe) ok(path, want string) {
	p.t.Helper()
	code, body, err := p.ask(path)
	if err != nil {
		p.t.Fatalf("asking the probe for %s: %v", path, err)
	}
	if code != http.StatusOK || !strings.Contains(body, want) {
		p.t.Errorf("%s from the pod: %d %q, want 200 with %q", path, code, body, want)
		return
	}
	p.t.Logf("%s from the pod: ok: %s", path, body)
}

// denied checks that the pod's request fails now.
func (p *podProbe) denied(path, what string) {
	p.t.Helper()
	code, body, err := p.ask(path)
	if err != nil {
		p.t.Fatalf("asking the probe for %s: %v", path, err)
	}
	if code != http.StatusBadGateway {
		p.t.Errorf("%s: %s from the pod went through (%d %q), want it to fail", what, path, code, body)
		return
	}
	p.t.Logf("%s: %s from the pod failed, as it should: %s", what, path, body)
}

// awaitOK waits (a minute at most) until the pod's request succeeds, with want in its answer.
func (p *podProbe) awaitOK(path, want string) {
	p.t.Helper()
	start := time.Now()
	var body string
	if err := stack.Poll(time.Minute, 500*time.Millisecond, path+" from the pod to succeed", func() (bool, string, error) {
		code, b, err := p.ask(path)
		if err != nil {
			return false, err.Error(), nil
		}
		body = b
		return code == http.StatusOK && strings.Contains(b, want), fmt.Sprintf("%d %s", code, b), nil
	}); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("%s from the pod: ok after %s: %s", path, time.Since(start).Round(time.Millisecond), body)
}

// awaitDenied waits (a minute at most) until the pod's request fails.
func (p *podProbe) awaitDenied(path, what string) {
	p.t.Helper()
	start := time.Now()
	var body string
	if err := stack.Poll(time.Minute, 500*time.Millisecond, what, func() (bool, string, error) {
		code, b, err := p.ask(path)
		if err != nil {
			return false, err.Error(), nil
		}
		body = b
		return code == http.StatusBadGateway, fmt.Sprintf("%s from the pod still went through: %d %s", path, code, b), nil
	}); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("%s: %s from the pod failed after %s: %s", what, path, time.Since(start).Round(time.Millisecond), body)
}
