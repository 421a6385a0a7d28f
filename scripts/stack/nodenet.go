package stack

import (
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
	"path/filepath"
	"syscall"
	"time"

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
