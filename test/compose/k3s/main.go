// Command k3s stands in for rancher/k3s in the compose test (test/compose), where no registry
// serves that image and k3s cannot be built cheaply. It is the image's entrypoint, /bin/k3s, and
// takes the compose file's `server` command: it runs what the compose stack uses of k3s — an
// API server with a datastore — from the control-plane cache (kube-apiserver and etcd at
// KUBERNETES_VERSION and ETCD_VERSION), and writes k3s's kubeconfig contract:
//
//   - the certificates under /var/lib/rancher/k3s/server/tls (the k3s volume; kept, as k3s
//     keeps them, across a restart): a CA, a serving certificate for every --tls-san, the
//     kubernetes Service names, localhost and 127.0.0.1, an admin client certificate
//     (system:admin in system:masters, as k3s's), the service-account keys;
//   - etcd, on 127.0.0.1 in the container (k3s's default datastore is SQLite through kine;
//     its role is the same), its data under /var/lib/rancher/k3s/server/db/etcd;
//   - kube-apiserver on :6443 with k3s's service range (10.43.0.0/16), issuer and audiences;
//   - once it is ready, the admin kubeconfig with server https://127.0.0.1:6443 at
//     /etc/rancher/k3s/k3s.yaml and at $K3S_KUBECONFIG_OUTPUT, mode $K3S_KUBECONFIG_MODE.
//
// What k3s runs besides is not there: no kube-controller-manager (no garbage collection,
// namespace deletion, service-account tokens), no scheduler, kubelet, CoreDNS or Flannel; the
// compose stack runs no pods. Other flags (--disable…) are logged and ignored.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	dataDir     = "/var/lib/rancher/k3s/server"
	serviceCIDR = "10.43.0.0/16"
	serviceIP   = "10.43.0.1"
	issuer      = "https://kubernetes.default.svc.cluster.local"
	server      = "https://127.0.0.1:6443"
)

func main() {
	log.SetFlags(log.LstdFlags)
	log.SetPrefix("[k3s stand-in] ")
	if len(os.Args) < 2 || os.Args[1] != "server" {
		log.Fatalf("usage: k3s server [--tls-san=NAME,...]: this stand-in serves only `k3s server` (got %q)", os.Args[1:])
	}
	var sans []string
	for _, a := range os.Args[2:] {
		if v, ok := strings.CutPrefix(a, "--tls-san="); ok {
			sans = append(sans, strings.Split(v, ",")...)
			continue
		}
		log.Printf("ignoring %s (what it configures is not part of the stand-in)", a)
	}
	if err := run(sans); err != nil {
		log.Fatal(err)
	}
}

func run(sans []string) error {
	tlsDir := filepath.Join(dataDir, "tls")
	if err := ensureCerts(tlsDir, sans); err != nil {
		return err
	}
	etcd := exec.Command("/usr/local/bin/etcd",
		"--name=default",
		"--data-dir="+filepath.Join(dataDir, "db", "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380",
		"--log-level=warn")
	apiserver := exec.Command("/usr/local/bin/kube-apiserver",
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		"--secure-port=6443",
		"--cert-dir="+filepath.Join(tlsDir, "temporary-certs"),
		"--tls-cert-file="+filepath.Join(tlsDir, "serving-kube-apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(tlsDir, "serving-kube-apiserver.key"),
		"--client-ca-file="+filepath.Join(tlsDir, "client-ca.crt"),
		"--service-account-key-file="+filepath.Join(tlsDir, "service.key"),
		"--service-account-signing-key-file="+filepath.Join(tlsDir, "service.key"),
		"--service-account-issuer="+issuer,
		"--api-audiences="+issuer+",k3s",
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--anonymous-auth=false",
		"--allow-privileged=true",
		"--enable-admission-plugins=NodeRestriction",
		"--profiling=false")
	for _, c := range []*exec.Cmd{etcd, apiserver} {
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	exited := make(chan string, 2)
	start := func(name string, c *exec.Cmd) error {
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		go func() { err := c.Wait(); exited <- fmt.Sprintf("%s exited: %v", name, err) }()
		return nil
	}
	stop := func() {
		for _, c := range []*exec.Cmd{apiserver, etcd} {
			if c.Process != nil && c.ProcessState == nil {
				_ = c.Process.Signal(syscall.SIGTERM)
			}
		}
	}
	if err := start("etcd", etcd); err != nil {
		return err
	}
	if err := start("kube-apiserver", apiserver); err != nil {
		stop()
		return err
	}
	ready := make(chan error, 1)
	go func() { ready <- awaitReady(tlsDir) }()
	for {
		select {
		case err := <-ready:
			if err != nil {
				stop()
				return err
			}
			if err := writeKubeconfigs(tlsDir); err != nil {
				stop()
				return err
			}
			log.Printf("kube-apiserver ready; kubeconfig written")
		case msg := <-exited:
			stop()
			return errors.New(msg)
		case sig := <-signals:
			// kube-apiserver first, while its storage answers; then etcd. Within docker's
			// stop time-out (10 s), or both are killed with this process.
			log.Printf("%s: stopping kube-apiserver, then etcd", sig)
			for _, c := range []*exec.Cmd{apiserver, etcd} {
				_ = c.Process.Signal(syscall.SIGTERM)
				select {
				case msg := <-exited:
					log.Print(msg)
				case <-time.After(4 * time.Second):
					log.Printf("%s did not stop within 4s: killing it", filepath.Base(c.Path))
					_ = c.Process.Kill()
					log.Print(<-exited)
				}
			}
			return nil
		}
	}
}

// ensureCerts writes the CA, the serving and admin certificates and the service-account key
// into dir, unless a previous run did.
func ensureCerts(dir string, sans []string) error {
	if _, err := os.Stat(filepath.Join(dir, "client-admin.key")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "k3s-stand-in-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
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
	leaf := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial(), now, now.Add(10*365*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER, 0o600)
	}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else if s != "" {
			dns = append(dns, s)
		}
	}
	if err := leaf("serving-kube-apiserver", &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"}, DNSNames: dns, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "service.key"), "EC PRIVATE KEY", saDER, 0o600); err != nil {
		return err
	}
	for _, name := range []string{"server-ca.crt", "client-ca.crt"} {
		if err := writePEM(filepath.Join(dir, name), "CERTIFICATE", caDER, 0o644); err != nil {
			return err
		}
	}
	// Last: its presence says the directory is complete.
	return leaf("client-admin", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// awaitReady polls /readyz as the admin until it answers 200 (3 minutes at most).
func awaitReady(dir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client-admin.crt"), filepath.Join(dir, "client-admin.key"))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "server-ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := c.Get(server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within 3 minutes: %s", last)
}

// writeKubeconfigs writes the admin kubeconfig where k3s does: /etc/rancher/k3s/k3s.yaml and
// $K3S_KUBECONFIG_OUTPUT, with $K3S_KUBECONFIG_MODE (octal; default 0600).
func writeKubeconfigs(dir string) error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("server-ca.crt")
	if err != nil {
		return err
	}
	crt, err := read("client-admin.crt")
	if err != nil {
		return err
	}
	key, err := read("client-admin.key")
	if err != nil {
		return err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
preferences: {}
users:
- name: default
  user:
    client-certificate-data: %s
    client-key-data: %s
`, ca, server, crt, key)
	mode := os.FileMode(0o600)
	if m := os.Getenv("K3S_KUBECONFIG_MODE"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			return fmt.Errorf("K3S_KUBECONFIG_MODE=%q: %w", m, err)
		}
		mode = os.FileMode(v)
	}
	paths := []string{"/etc/rancher/k3s/k3s.yaml"}
	if out := os.Getenv("K3S_KUBECONFIG_OUTPUT"); out != "" {
		paths = append(paths, out)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(kubeconfig), mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return nil
}
