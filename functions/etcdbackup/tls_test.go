package etcdbackup_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// An etcd that speaks only TLS and wants a client certificate is backed up with the
// material of spec.etcd.tlsSecretRef; with a CA that did not sign its certificate the
// condition says why the handshake fails.
func TestSnapshotOverMutualTLS(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	createNamespaces(t, c, "garden", "team")
	reg, _ := providers(t)
	dest := newDestination(t, env, c, reg, local.Type, "tls")
	snap := &etcdbackup.Snapshotter{Client: c, Providers: reg, Log: zaptest.NewLogger(t), Now: time.Now}
	ctx := context.Background()

	ca, caKey := newCA(t, "etcd-ca")
	serverCert, serverKey := issue(t, ca, caKey, "etcd-server", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := issue(t, ca, caKey, "housekeeper", x509.ExtKeyUsageClientAuth)
	endpoint := startTLSEtcd(t, ca, serverCert, serverKey)
	otherCA, _ := newCA(t, "other-ca")

	createSecret(t, c, "team", "etcd-client", map[string][]byte{"ca.crt": ca, "tls.crt": clientCert, "tls.key": clientKey})
	createSecret(t, c, "team", "etcd-wrong-ca", map[string][]byte{"ca.crt": otherCA, "tls.crt": clientCert, "tls.key": clientKey})
	for name, want := range map[string]string{"etcd-client": backupv1alpha1.ReasonBackupTaken, "etcd-wrong-ca": backupv1alpha1.ReasonInvalidTLS} {
		cfg := newConfig("team", "via-"+name, dest.obj.Name, 3, endpoint)
		cfg.Spec.Etcd.TLSSecretRef = &backupv1alpha1.LocalObjectReference{Name: name}
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		fctx := runner.WithFire(ctx, runner.Fire{At: time.Now().Truncate(time.Second)})
		if err := snap.Handle(fctx, dueEvent(t, cfg)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, cond := condition(t, c, cfg, backupv1alpha1.ConditionBackupSucceeded)
		if cond == nil || cond.Reason != want {
			t.Fatalf("%s: condition %+v, want %s", name, cond, want)
		}
		if name == "etcd-wrong-ca" && !strings.Contains(cond.Message, "certificate signed by unknown authority") {
			t.Fatalf("the condition does not say why: %s", cond.Message)
		}
		if strings.Contains(cond.Message, "PRIVATE KEY") {
			t.Fatalf("the condition quotes key material: %s", cond.Message)
		}
		t.Logf("%s: %s: %s", name, cond.Reason, cond.Message)
	}
	if keys := listAll(t, dest.store, "team/via-etcd-client/"); len(keys) != 1 {
		t.Fatalf("backups over TLS: %q", keys)
	}
}

func newCA(t *testing.T, name string) (certPEM []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

func issue(t *testing.T, caPEM []byte, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// startTLSEtcd runs etcd (the control plane's v3.6) serving clients over TLS only, with
// client certificates required; it returns the client URL once etcd answers.
func startTLSEtcd(t *testing.T, ca, cert, key []byte) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": ca, "server.crt": cert, "server.key": key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := stack.ControlPlaneDir()
	if err != nil {
		t.Fatal(err)
	}
	client, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	clientURL, peerURL := fmt.Sprintf("https://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.Command(filepath.Join(bin, "etcd"), "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "tls="+peerURL,
		"--cert-file", filepath.Join(dir, "server.crt"), "--key-file", filepath.Join(dir, "server.key"),
		"--trusted-ca-file", filepath.Join(dir, "ca.crt"), "--client-cert-auth", "--log-level", "warn")
	logs, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logs.Close() })
	// Up when it accepts a TLS handshake on the client port.
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", client), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			_ = conn.Close()
			return clientURL
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd with TLS did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
