package stack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// A Node is a real Kubernetes node on this machine, registered with a Kube started ForNode:
// containerd (CRI) with runc, the kubelet, kube-proxy (iptables), kube-controller-manager and
// kube-scheduler, with a CNI bridge network for the pods and CoreDNS as the cluster DNS. Pods
// get their own network namespaces, ClusterIPs work from pods and from the host, and a pod
// reaches the API server through the in-cluster config with its service account's token.
//
// The node lives in namespaces of its own, held open by a "holder" process (the pause binary
// under unshare): a network namespace — the kubelet, kube-proxy, containerd (and so the pods'
// bridge), kube-controller-manager and kube-scheduler run in it, connected to the host by a veth
// pair (hk-node-<slot>) — and a mount namespace in which /run and /var/lib are tmpfs of their
// own (containerd's shim sockets and runc's state, the pods' network namespaces, the CNI cache,
// the kubelet's hard-wired /var/lib/kubelet/device-plugins) and /var/lib/kubelet and /var/log
// are the node directory's kubelet/ and log/. So kube-proxy's and the CNI plugins' iptables
// rules, the bridge, the pods' veths, the network namespaces' bind mounts, the sockets, the
// volume and rootfs mounts all go when the namespaces go, and nodes of concurrent test
// processes do not meet. What is still the host's: the veth pair and its two routes (Services
// and pods through the node), the pods' cgroups under /<hierarchy>/housekeeper-node-<slot>, and
// six sysctls the kubelet sets (vm.overcommit_memory, vm.panic_on_oom, kernel.panic,
// kernel.panic_on_oops, kernel.keys.root_maxkeys and root_maxbytes); Stop removes or restores
// each.
//
// The cluster DNS is CoreDNS on the host (not a pod: no image to pull), listening on HostIP:53
// with the kubernetes plugin for cluster.local and forwarding the rest to the host's resolvers;
// the kubelet gives pods HostIP as their nameserver.
//
// The CNI bridge plugin enforces no NetworkPolicy. With NodeOptions.NetworkPolicies the node
// runs an enforcer too, kube-network-policies (a process in the node's namespaces, not a pod):
// see startNetworkPolicies for what it enforces where, and what a policy must allow here.
type Node struct {
	// Name is the Node object's name, housekeeper-node-<slot>.
	Name string
	// NodeIP is the node's InternalIP, its end of the link (its kubelet serves on :10250).
	NodeIP string
	// HostIP is the host's end of the link: the API server and CoreDNS listen on it for the pods.
	// A server of a test that pods are to reach must listen on it (or on every address).
	HostIP string
	// ServiceCIDR and PodCIDR are the node's ranges; the host routes both through the node.
	ServiceCIDR, PodCIDR string
	// DNS is the pods' nameserver (CoreDNS, on HostIP:53).
	DNS string
	// PauseImage is containerd's sandbox_image, built from scripts/cmd/pause at every start.
	PauseImage string
	// Link is the host's end of the veth pair to the node, hk-node-<slot>.
	Link string
	// APIServerPort is the port the API server really listens on (envtest picks a free one). A
	// pod's connection to the `kubernetes` Service (its ClusterIP, port 443) leaves the pod's
	// network for HostIP:APIServerPort — kube-proxy translates it before any NetworkPolicy sees
	// it — so an egress policy that lets pods reach the API server must allow this port, not 443.
	APIServerPort int
	// NetworkPolicies says whether the node enforces NetworkPolicies (NodeOptions.NetworkPolicies).
	NetworkPolicies bool

	kube          *Kube
	net           *nodeNetwork
	dir           string
	logs          func(string) io.Writer
	cgroup        string
	holder        *Process
	holderMountNS uint64
	procs         []namedProcess
	client        kubernetes.Interface
}

type namedProcess struct {
	name string
	proc *Process
}

// NodeOptions configure StartNode.
type NodeOptions struct {
	// Dir holds the node's files (containerd's root and state and socket, the kubelet's root,
	// the pods' logs, configuration); required, not shared with another node, and not under
	// /run, /var/lib or /var/log (t.TempDir() is fine).
	Dir string
	// Logs gives the writer of each component's output by name, once a component: containerd,
	// kubelet, kube-controller-manager, kube-scheduler, kube-proxy, coredns, node (the
	// namespaces' holder) and, with NetworkPolicies, network-policies; nil, or a nil writer:
	// discarded.
	Logs func(component string) io.Writer
	// Images are image tarballs (images.WriteTarball) imported into containerd before the
	// kubelet starts; ImportImages imports more later.
	Images []string
	// Verbosity is the klog level (-v) of the Kubernetes components; 0: 1.
	Verbosity int
	// NetworkPolicies runs a NetworkPolicy enforcer in the node — kube-network-policies at
	// KUBE_NETWORK_POLICIES_VERSION, built by scripts/install-node.sh, its log the component
	// network-policies — and StartNode waits until its rules are in place. False (the default):
	// NetworkPolicies are stored but nothing enforces them.
	NetworkPolicies bool
}

// The node's components, at the pinned versions.
var nodeBinaries = []string{"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns"}

// NodeDir is the directory with kubelet, kube-controller-manager, kube-scheduler, kube-proxy
// (KUBERNETES_VERSION) and coredns (COREDNS_VERSION), as scripts/install-node.sh builds them.
func NodeDir() (string, error) {
	if dir := os.Getenv("HOUSEKEEPER_NODE"); dir != "" {
		return dir, nil
	}
	return installed("scripts/install-node.sh", func(v map[string]string) string {
		return filepath.Join("node", fmt.Sprintf("kube-%s-coredns-%s", v["KUBERNETES_VERSION"], v["COREDNS_VERSION"]))
	}, nodeBinaries...)
}

// The programs the node runs from Debian's packages (scripts/install-node.sh installs them).
var nodeHostPrograms = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "conntrack", "ip", "nsenter", "unshare", "mount"}

const (
	cniBinDir     = "/usr/lib/cni" // containernetworking-plugins
	nodePath      = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	pauseImage    = "housekeeper.local/pause:v1"
	clusterDomain = "cluster.local"
	// k8sNamespace is containerd's namespace of the CRI plugin: the kubelet's images and containers.
	k8sNamespace = "k8s.io"
)

// StartNode starts a node for kube (StartKube with ForNode) and waits until it can run pods:
// the Node is Ready, the default ServiceAccount exists, CoreDNS answers and the `kubernetes`
// Service's ClusterIP is reachable from the host. On an error everything started is stopped.
// It needs root and scripts/install-node.sh; it runs on cgroup v1 (this VM's; v2 is untested).
// Stop the Node before its Kube.
func StartNode(kube *Kube, opts NodeOptions) (n *Node, err error) {
	if kube == nil || kube.node == nil {
		return nil, errNotForNode
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("a node needs root (network and mount namespaces, cgroups, iptables)")
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("NodeOptions.Dir is required")
	}
	for _, hidden := range []string{"/run", "/var/run", "/var/lib", "/var/log"} {
		if abs, _ := filepath.Abs(opts.Dir); abs == hidden || strings.HasPrefix(abs, hidden+"/") {
			return nil, fmt.Errorf("NodeOptions.Dir %s: under %s, which the node's mount namespace replaces", opts.Dir, hidden)
		}
	}
	bins, err := NodeDir()
	if err != nil {
		return nil, err
	}
	for _, p := range nodeHostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			if _, err2 := os.Stat(filepath.Join("/usr/sbin", p)); err2 != nil {
				return nil, fmt.Errorf("%s %w: run `make node` (scripts/install-node.sh)", p, ErrNotInstalled)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		return nil, fmt.Errorf("the CNI plugins are %w in %s: run `make node` (scripts/install-node.sh)", ErrNotInstalled, cniBinDir)
	}
	var enforcer string
	if opts.NetworkPolicies {
		if enforcer, err = NetworkPolicyEnforcerBinary(); err != nil {
			return nil, err
		}
		if _, err := exec.LookPath("nft"); err != nil {
			return nil, fmt.Errorf("nft (Debian's nftables) %w: run `make node` (scripts/install-node.sh)", ErrNotInstalled)
		}
	}
	if opts.Verbosity == 0 {
		opts.Verbosity = 1
	}
	nn := kube.node
	if nn.running {
		return nil, fmt.Errorf("a node of this Kube runs: one node a Kube")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	apiPort, err := strconv.Atoi(kube.env.ControlPlane.APIServer.SecureServing.Port)
	if err != nil {
		return nil, fmt.Errorf("the API server's port %q: %w", kube.env.ControlPlane.APIServer.SecureServing.Port, err)
	}
	n = &Node{
		Name:        fmt.Sprintf("housekeeper-node-%d", nn.slot),
		NodeIP:      nn.nodeIP.String(),
		HostIP:      nn.hostIP.String(),
		ServiceCIDR: nn.serviceCIDR,
		PodCIDR:     nn.podCIDR,
		DNS:         nn.hostIP.String(),
		PauseImage:  pauseImage,
		kube:        kube,
		net:         nn,
		dir:         dir,
		logs:        opts.Logs,
		Link:        fmt.Sprintf("hk-node-%d", nn.slot),
		cgroup:      fmt.Sprintf("housekeeper-node-%d", nn.slot),

		APIServerPort:   apiPort,
		NetworkPolicies: opts.NetworkPolicies,
	}
	if n.client, err = kubernetes.NewForConfig(kube.Config); err != nil {
		return nil, err
	}
	nn.running = true
	defer func() {
		if err != nil {
			if stopErr := n.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping what had started: %v)", err, stopErr)
			}
			n = nil
		}
	}()
	// What a previous process with this slot may have left when it was killed.
	n.cleanupHost()
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/ipam", "kubelet", "log", "etc", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return n, err
		}
	}
	// Compiling is not on the clock of the node's start.
	if err := n.buildPause(context.Background()); err != nil {
		return n, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := saveKubeletSysctls(); err != nil {
		return n, err
	}
	if err := n.makeCgroups(); err != nil {
		return n, err
	}
	if err := n.startHolder(); err != nil {
		return n, err
	}
	if err := n.connect(); err != nil {
		return n, err
	}
	if err := n.writeConfigs(); err != nil {
		return n, err
	}

	// containerd, then the images the kubelet must not pull.
	if err := n.start("containerd", "containerd", []string{"--config", n.path("etc/containerd.toml")}, true); err != nil {
		return n, err
	}
	if err := n.awaitSocket(ctx, n.containerdSocket()); err != nil {
		return n, err
	}
	if err := n.ImportImages(append([]string{n.path("bin/pause.tar")}, opts.Images...)...); err != nil {
		return n, err
	}

	v := "--v=" + strconv.Itoa(opts.Verbosity)
	kubeconfig := n.path("etc/node.kubeconfig")
	if err := n.start("kubelet", filepath.Join(bins, "kubelet"), []string{"--config", n.path("etc/kubelet.yaml"),
		"--kubeconfig", kubeconfig, "--hostname-override", n.Name, "--node-ip", n.NodeIP, v}, true); err != nil {
		return n, err
	}
	if err := n.start("kube-controller-manager", filepath.Join(bins, "kube-controller-manager"), []string{
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--controllers=*",
		"--root-ca-file", n.path("etc/ca.crt"), "--service-account-private-key-file", nn.saKeyFile,
		"--use-service-account-credentials=false", "--cluster-name=housekeeper", v}, true); err != nil {
		return n, err
	}
	if err := n.start("kube-scheduler", filepath.Join(bins, "kube-scheduler"), []string{
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", v}, true); err != nil {
		return n, err
	}
	if err := n.start("kube-proxy", filepath.Join(bins, "kube-proxy"), []string{"--config", n.path("etc/kube-proxy.yaml"), v}, true); err != nil {
		return n, err
	}
	// Before any pod can start: no pod of the node runs unpoliced.
	if opts.NetworkPolicies {
		if err := n.startNetworkPolicies(ctx, enforcer, v); err != nil {
			return n, err
		}
	}
	// CoreDNS on the host, on HostIP: it reaches the API server on loopback and the host's
	// resolvers as the host does.
	if err := n.start("coredns", filepath.Join(bins, "coredns"), []string{"-conf", n.path("etc/Corefile")}, false); err != nil {
		return n, err
	}
	if err := n.awaitReady(ctx); err != nil {
		return n, err
	}
	return n, nil
}

func (n *Node) path(rel string) string   { return filepath.Join(n.dir, rel) }
func (n *Node) containerdSocket() string { return n.path("containerd/containerd.sock") }
func (n *Node) log(component string) io.Writer {
	if n.logs != nil {
		if w := n.logs(component); w != nil {
			return w
		}
	}
	return io.Discard
}

// buildPause builds scripts/cmd/pause, static, and writes its image as containerd's
// sandbox_image into bin/pause.tar.
func (n *Node) buildPause(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	bin := n.path("bin/pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./scripts/cmd/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause binary: %v\n%s", err, out)
	}
	img, err := images.Binary(ctx, images.Spec{Binary: bin, Path: "/pause", User: "65535:65535"})
	if err != nil {
		return err
	}
	ref, err := images.ParseReference(pauseImage)
	if err != nil {
		return err
	}
	return images.WriteTarball(ctx, n.path("bin/pause.tar"), map[name.Reference]v1.Image{ref: img})
}

// startHolder starts the process that holds the node's network and mount namespaces open, and
// sets the mount namespace up: /run and /var/lib tmpfs of its own; /var/lib/kubelet and
// /var/log the node directory's kubelet/ and log/.
func (n *Node) startHolder() error {
	ready := n.path("holder.ready")
	script := strings.Join([]string{
		"set -e",
		"mount -n -t tmpfs -o mode=0755 tmpfs /run",
		"mount -n -t tmpfs -o mode=0755 tmpfs /var/lib",
		"mkdir /var/lib/kubelet",
		"mount -n --bind " + shellQuote(n.path("kubelet")) + " /var/lib/kubelet",
		"mount -n --bind " + shellQuote(n.path("log")) + " /var/log",
		": > " + shellQuote(ready),
		"exec " + shellQuote(n.path("bin/pause")),
	}, "\n")
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--", "/bin/sh", "-c", script)
	w := n.log("node")
	cmd.Dir, cmd.Stdout, cmd.Stderr = n.dir, w, w
	cmd.Env = append(os.Environ(), "PATH="+nodePath)
	p, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	n.holder = p
	err = Poll(10*time.Second, 20*time.Millisecond, "the node's namespaces", func() (bool, string, error) {
		if p.Exited() {
			return false, "", fmt.Errorf("the holder exited: %s (see the node log)", p.State())
		}
		_, err := os.Stat(ready)
		return err == nil, "", nil
	})
	if err != nil {
		return err
	}
	if n.holderMountNS, err = nsInode(p.Pid(), "mnt"); err != nil {
		return err
	}
	return n.writeState()
}

// connect creates the veth pair between the host and the node's network namespace, addresses
// it, routes the Service and pod ranges through the node and sets the node namespace's sysctls:
// forwarding, and bridged traffic through iptables (kube-proxy's rules for pods on one bridge).
func (n *Node) connect() error {
	pid := strconv.Itoa(n.holder.Pid())
	link := fmt.Sprintf("%s/30", n.HostIP)
	nodeAddr := fmt.Sprintf("%s/30", n.NodeIP)
	steps := [][]string{
		{"ip", "link", "add", n.Link, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "addr", "add", link, "dev", n.Link},
		{"ip", "link", "set", n.Link, "up"},
		{"nsenter", "--target", pid, "--net", "ip", "addr", "add", nodeAddr, "dev", "eth0"},
		{"nsenter", "--target", pid, "--net", "ip", "link", "set", "lo", "up"},
		{"nsenter", "--target", pid, "--net", "ip", "link", "set", "eth0", "up"},
		{"nsenter", "--target", pid, "--net", "ip", "route", "add", "default", "via", n.HostIP},
		{"ip", "route", "add", n.ServiceCIDR, "via", n.NodeIP, "dev", n.Link},
		{"ip", "route", "add", n.PodCIDR, "via", n.NodeIP, "dev", n.Link},
		{"nsenter", "--target", pid, "--net", "/bin/sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && " +
			"echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables && echo 1 > /proc/sys/net/bridge/bridge-nf-call-ip6tables"},
	}
	for _, s := range steps {
		if err := runCmd(s...); err != nil {
			return fmt.Errorf("connecting the node: %w", err)
		}
	}
	return nil
}

// start starts a component, in the node's namespaces when inNode (else on the host).
func (n *Node) start(name, bin string, args []string, inNode bool) error {
	return n.startEnv(name, bin, args, inNode, nil)
}

// startEnv is start with env added to the component's environment.
func (n *Node) startEnv(name, bin string, args []string, inNode bool, env []string) error {
	argv := append([]string{bin}, args...)
	if inNode {
		argv = append([]string{"nsenter", "--target", strconv.Itoa(n.holder.Pid()), "--mount", "--net", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	w := n.log(name)
	cmd.Dir, cmd.Stdout, cmd.Stderr = n.dir, w, w
	cmd.Env = append(append(os.Environ(), "PATH="+nodePath), env...)
	p, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, namedProcess{name, p})
	return nil
}

func (n *Node) awaitSocket(ctx context.Context, socket string) error {
	p := n.procs[len(n.procs)-1]
	for {
		conn, err := net.DialTimeout("unix", socket, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if p.proc.Exited() {
			return fmt.Errorf("%s exited (%s) before listening on %s (see its log)", p.name, p.proc.State(), socket)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not listen on %s", p.name, socket)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitReady waits until the node can run pods, naming a component that exits meanwhile.
func (n *Node) awaitReady(ctx context.Context) error {
	exited := func() error {
		for _, p := range n.procs {
			if p.proc.Exited() {
				return fmt.Errorf("%s exited: %s (see its log)", p.name, p.proc.State())
			}
		}
		return nil
	}
	deadline, _ := ctx.Deadline()
	timeout := time.Until(deadline)
	if err := Poll(timeout, 200*time.Millisecond, "the Node "+n.Name+" to be Ready", func() (bool, string, error) {
		if err := exited(); err != nil {
			return false, "", err
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not registered", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message, nil
			}
		}
		return false, "no Ready condition", nil
	}); err != nil {
		return err
	}
	if err := Poll(time.Until(deadline), 200*time.Millisecond, "the default ServiceAccount and kube-root-ca.crt (kube-controller-manager)", func() (bool, string, error) {
		if err := exited(); err != nil {
			return false, "", err
		}
		if _, err := n.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err.Error(), nil
		}
		_, err := n.client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		return err
	}
	httpc := &http.Client{Timeout: time.Second}
	if err := Poll(time.Until(deadline), 100*time.Millisecond, "CoreDNS to be ready", func() (bool, string, error) {
		if err := exited(); err != nil {
			return false, "", err
		}
		resp, err := httpc.Get("http://" + net.JoinHostPort(n.HostIP, "8181") + "/ready")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	}); err != nil {
		return err
	}
	api := net.JoinHostPort(n.net.apiIP.String(), "443")
	return Poll(time.Until(deadline), 100*time.Millisecond, "the kubernetes Service ("+api+") from the host (kube-proxy)", func() (bool, string, error) {
		if err := exited(); err != nil {
			return false, "", err
		}
		conn, err := net.DialTimeout("tcp", api, time.Second)
		if err != nil {
			return false, err.Error(), nil
		}
		conn.Close()
		return true, "", nil
	})
}

// Stop stops the node and removes all it put on the host: its processes (the components,
// containerd's shims and the containers), its namespaces (and with them the bridge, the pods'
// veths, the iptables rules, the NetworkPolicy enforcer's nftables table and nfqueue, its
// service account token and every mount), the veth pair and its routes, the cgroups; it
// restores the kubelet's sysctls when no other node runs. The Node's Dir stays (the caller's).
// The Kube stays running. Stop is safe to call on a partly started node.
func (n *Node) Stop() error {
	var errs []string
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].proc.Stop()
	}
	n.procs = nil
	if n.holder != nil {
		// The shims and containers: the processes in the node's cgroups, in the holder's mount
		// namespace, or naming the node's directory.
		if err := n.killAll(n.holder.Pid()); err != nil {
			errs = append(errs, err.Error())
		}
		n.holder.Stop()
		n.holder = nil
	}
	if err := Poll(10*time.Second, 50*time.Millisecond, "the node's link to go with its namespace", func() (bool, string, error) {
		_, err := net.InterfaceByName(n.Link)
		return err != nil, "", nil
	}); err != nil {
		if err := runCmd("ip", "link", "del", n.Link); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := n.removeCgroups(); err != nil {
		errs = append(errs, err.Error())
	}
	if n.net != nil {
		_ = os.Remove(nodeStateFile(n.net.slot))
		n.net.running = false
	}
	if err := restoreKubeletSysctls(n.Link); err != nil {
		errs = append(errs, err.Error())
	}
	if left := mountsUnder(n.dir); len(left) > 0 {
		errs = append(errs, "mounts left under "+n.dir+": "+strings.Join(left, ", "))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping node %s: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Client is a clientset of the node's Kube (its administrator).
func (n *Node) Client() kubernetes.Interface { return n.client }

// RESTConfig is the Kube's administrator config.
func (n *Node) RESTConfig() *rest.Config { return rest.CopyConfig(n.kube.Config) }

func runCmd(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
