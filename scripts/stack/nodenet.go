package stack

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeOption configures StartKube.
type KubeOption func(*kubeOptions)

type kubeOptions struct {
	forNode bool
}

// ForNode prepares the API server for a Node (StartNode) — what pods need of it:
//
//   - it is reachable from the node's network namespace: it listens on every address (still on
//     the port envtest picks) and advertises the host's end of the node's link (Node.HostIP),
//     which is then the endpoint of the `kubernetes` Service;
//   - its Service IP range is the node's own (Node.ServiceCIDR), so that a host route sends
//     ClusterIPs to the node's kube-proxy, and its serving certificate (our own CA, written into
//     the cert directory before envtest would write its own) is valid for the `kubernetes`
//     Service's ClusterIP and names, the link address and loopback: a pod's in-cluster config
//     (KUBERNETES_SERVICE_HOST) verifies it;
//   - the ServiceAccount admission plugin is on (envtest turns it off), so that pods get their
//     service account's token projected;
//   - it reaches kubelets (logs, exec) by their InternalIP.
//
// It takes one of the host's node slots (a lock file /run/housekeeper-node-<n>.lock, held until
// Kube.Stop or the process's exit), from which the node's addresses derive, so that nodes of
// concurrent test processes do not collide.
func ForNode() KubeOption { return func(o *kubeOptions) { o.forNode = true } }

// The addresses of node slot n (1 ≤ n ≤ maxNodeSlots); see nodeNetwork.
const maxNodeSlots = 200

// nodeNetwork is the addressing of the node of slot n:
//
//	link          100.64.n.0/30  host end .1 (HostIP: the API server and CoreDNS for pods), node end .2 (NodeIP)
//	Services      10.96.n.0/24   the API server's service-cluster-ip-range; 10.96.n.1 is `kubernetes`
//	pods          10.244.n.0/24  the node's CNI bridge network
//
// The host routes the Service and pod ranges to the node's end of the link.
type nodeNetwork struct {
	slot        int
	lock        *os.File
	hostIP      net.IP
	nodeIP      net.IP
	serviceCIDR string
	podCIDR     string
	apiIP       net.IP // the `kubernetes` Service's ClusterIP
	caPEM       []byte // the CA of the API server's serving certificate (the root-ca-cert-publisher's)
	saKeyFile   string // the service-account signing key (kube-controller-manager's token controller)
	running     bool   // a Node of it runs
}

func nodeSlotLock(n int) string { return fmt.Sprintf("/run/housekeeper-node-%d.lock", n) }

// allocateNodeSlot takes the first free node slot: a lock file flock'd for as long as the slot
// is used. A lock file is removed when its slot is released, so after taking the lock we check
// that the path still names the file we locked.
func allocateNodeSlot() (int, *os.File, error) {
	for n := 1; n <= maxNodeSlots; n++ {
		path := nodeSlotLock(n)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, fmt.Errorf("node slot lock: %w (a node needs root)", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		var held, named syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) != nil || syscall.Stat(path, &named) != nil || held.Ino != named.Ino {
			f.Close() // released and removed under us: try the slot again
			n--
			continue
		}
		return n, f, nil
	}
	return 0, nil, fmt.Errorf("all %d node slots of this host are taken (/run/housekeeper-node-*.lock)", maxNodeSlots)
}

// release gives the slot up, unless a node of it still runs (the Kube was stopped before its
// Node): then the lock stays held until the process exits, so that no other node takes the slot
// and, cleaning up after a killed node, kills this one.
func (nn *nodeNetwork) release() {
	if nn == nil || nn.lock == nil || nn.running {
		return
	}
	_ = os.Remove(nodeSlotLock(nn.slot))
	_ = nn.lock.Close()
	nn.lock = nil
}

// prepareForNode takes a node slot and configures api (before envtest starts it) as ForNode
// describes, writing its certificates into certDir.
func prepareForNode(api *envtest.APIServer, certDir string) (*nodeNetwork, error) {
	slot, lock, err := allocateNodeSlot()
	if err != nil {
		return nil, err
	}
	nn := &nodeNetwork{
		slot:        slot,
		lock:        lock,
		hostIP:      net.IPv4(100, 64, byte(slot), 1).To4(),
		nodeIP:      net.IPv4(100, 64, byte(slot), 2).To4(),
		serviceCIDR: fmt.Sprintf("10.96.%d.0/24", slot),
		podCIDR:     fmt.Sprintf("10.244.%d.0/24", slot),
		apiIP:       net.IPv4(10, 96, byte(slot), 1).To4(),
		saKeyFile:   filepath.Join(certDir, "sa-signer.key"),
	}
	if err := nn.writeCerts(certDir); err != nil {
		nn.release()
		return nil, err
	}
	api.SecureServing.CA = nn.caPEM
	args := api.Configure()
	args.Set("bind-address", "0.0.0.0")
	args.Set("advertise-address", nn.hostIP.String())
	args.Set("service-cluster-ip-range", nn.serviceCIDR)
	args.Disable("disable-admission-plugins")
	// Logs, exec, port-forward: the kubelet by its InternalIP (its Hostname is the node's name,
	// which no resolver knows).
	args.Set("kubelet-preferred-address-types", "InternalIP,Hostname")
	return nn, nil
}

// writeCerts writes what envtest would (apiserver.crt/.key, sa-signer.crt/.key; envtest keeps
// files it finds) with a serving certificate for the names a pod reaches the API server by.
func (nn *nodeNetwork) writeCerts(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "housekeeper-node-ca", Organization: []string{"housekeeper"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver", Organization: []string{"housekeeper"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, nn.hostIP, nn.apiIP},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "service-accounts"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	saDER, err := x509.CreateCertificate(rand.Reader, saTmpl, saTmpl, &saKey.PublicKey, saKey)
	if err != nil {
		return err
	}
	nn.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: saDER}),
	}
	for name, k := range map[string]*ecdsa.PrivateKey{"apiserver.key": key, "sa-signer.key": saKey} {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

var errNotForNode = errors.New("the API server was not started for a node: stack.StartKube(logs, stack.ForNode())")

// NetworkPolicyEnforcerBinary is kube-network-policies at KUBE_NETWORK_POLICIES_VERSION, as
// scripts/install-node.sh builds it (patched to queue packets through nft_compat's NFQUEUE).
func NetworkPolicyEnforcerBinary() (string, error) {
	dir, err := installed("scripts/install-node.sh", func(v map[string]string) string {
		return filepath.Join("node", "kube-network-policies-"+v["KUBE_NETWORK_POLICIES_VERSION"])
	}, "kube-network-policies")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kube-network-policies"), nil
}

const (
	// The enforcer's nftables table (family inet) and nfqueue, in the node's network namespace.
	netpolTable = "kube-network-policies"
	netpolQueue = 100
	// Its ServiceAccount (in kube-system), ClusterRole and ClusterRoleBinding.
	netpolAccount = "housekeeper-node-network-policies"
	// Where rest.InClusterConfig reads a service account's credentials; in the node's mount
	// namespace /var/run is its own /run, a tmpfs that goes with it.
	inClusterSecrets = "/run/secrets/kubernetes.io/serviceaccount"
)

// startNetworkPolicies starts the NetworkPolicy enforcer in the node's namespaces and waits until
// its nftables table is in place and it listens on its nfqueue.
//
// The enforcer is kube-network-policies: in the node's network namespace an nftables chain at
// postrouting, before source NAT (the CNI bridge's masquerade) and after kube-proxy's DNAT, hands
// the first packet of each new connection from or to a pod that some NetworkPolicy selects to
// the enforcer through an nfqueue; it evaluates the policies (the pods, namespaces and policies
// from the API server) and accepts or drops the packet; the rest of an accepted connection
// passes by conntrack. A queued packet is dropped while the enforcer does not run (no bypass).
// What that means here:
//
//   - a connection to a Service is judged by its endpoint: to the `kubernetes` Service by
//     HostIP:APIServerPort (not ClusterIP:443), to another Service by its pod's IP and
//     targetPort;
//   - the API server, CoreDNS (HostIP:53, UDP and TCP) and a test's servers on the host are not
//     pods: an egress rule allows them if it has no `to` (ports only: any destination), or an
//     ipBlock holding HostIP; namespace and pod selectors never match them;
//   - a connection from the host (a test process) to a pod comes from HostIP, outside the
//     cluster: ingress rules with `from` selectors do not allow it; the node's own components
//     (the kubelet's probes) are root in the node's namespace and the enforcer never judges
//     root's own packets;
//   - the enforcer learns a pod's IP from the pod's status (Debian's containerd 1.6 has no NRI):
//     until then, a new pod's connections are not judged, and a peer's policies see it as
//     outside the cluster.
func (n *Node) startNetworkPolicies(ctx context.Context, bin, verbosity string) error {
	if err := n.netpolAccess(ctx); err != nil {
		return fmt.Errorf("the NetworkPolicy enforcer's access to the API server: %w", err)
	}
	token, err := n.client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, netpolAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for the NetworkPolicy enforcer: %w", err)
	}
	// Seen from the host, through the holder's root, the node's own /run.
	secrets := filepath.Join(fmt.Sprintf("/proc/%d/root", n.holder.Pid()), inClusterSecrets)
	if err := os.MkdirAll(secrets, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(secrets, "token"), []byte(token.Status.Token), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(secrets, "ca.crt"), n.net.caPEM, 0o644); err != nil {
		return err
	}
	env := []string{"KUBERNETES_SERVICE_HOST=" + n.HostIP, "KUBERNETES_SERVICE_PORT=" + strconv.Itoa(n.APIServerPort)}
	args := []string{
		"--hostname-override=" + n.Name,
		"--nfqueue-id=" + strconv.Itoa(netpolQueue),
		"--metrics-bind-address=127.0.0.1:9080",
		// Queue DNS like the rest, at postrouting: the conntrack race the fix avoids is fixed in
		// kernels from 6.12 (this VM's: 6.18).
		"--netfilter-bug-1766-fix=false",
		// No NRI in containerd 1.6. (v0.8.0 ignores the flag and fails to connect, harmlessly.)
		"--disable-nri",
		verbosity,
	}
	if err := n.startEnv("network-policies", bin, args, true, env); err != nil {
		return err
	}
	p := n.procs[len(n.procs)-1].proc
	deadline, _ := ctx.Deadline()
	return Poll(time.Until(deadline), 100*time.Millisecond, "the NetworkPolicy enforcer's nftables table and nfqueue", func() (bool, string, error) {
		if p.Exited() {
			return false, "", fmt.Errorf("network-policies exited: %s (see its log)", p.State())
		}
		table, err := n.nft("list", "table", "inet", netpolTable)
		if err != nil || !strings.Contains(table, "postrouting") {
			return false, fmt.Sprintf("no table inet %s with a postrouting chain (yet): %v %s", netpolTable, err, table), nil
		}
		queues, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/netfilter/nfnetlink_queue", n.holder.Pid()))
		if err != nil {
			return false, err.Error(), nil
		}
		for _, line := range strings.Split(string(queues), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(netpolQueue) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("nothing listens on nfqueue %d (yet)", netpolQueue), nil
	})
}

// netpolAccess gives the enforcer's ServiceAccount what it reads (pods, namespaces,
// NetworkPolicies; nodes and events as its upstream manifest does).
func (n *Node) netpolAccess(ctx context.Context) error {
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	read := []string{"get", "list", "watch"}
	if err := create(func() error {
		_, err := n.client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: netpolAccount}}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	if err := create(func() error {
		_, err := n.client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: netpolAccount},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: read},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
			},
		}, metav1.CreateOptions{})
		return err
	}()); err != nil {
		return err
	}
	return create(func() error {
		_, err := n.client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: netpolAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: netpolAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: netpolAccount, Namespace: metav1.NamespaceSystem}},
		}, metav1.CreateOptions{})
		return err
	}())
}

// nft runs nft in the node's network namespace.
func (n *Node) nft(args ...string) (string, error) {
	argv := append([]string{"--target", strconv.Itoa(n.holder.Pid()), "--net", "nft"}, args...)
	var out bytes.Buffer
	cmd := exec.Command("nsenter", argv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
