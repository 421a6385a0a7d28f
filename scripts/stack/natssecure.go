package stack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSTLS is the TLS material of a secured nats-server: a CA, the server's certificate for
// 127.0.0.1 and a client certificate, both signed by the CA.
type NATSTLS struct{ CA, ServerCert, ServerKey, ClientCert, ClientKey string }

// StartNATSWithConfig starts nats-server from the configuration file path, as an operator's
// nats-server reads it (TLS, accounts, users), on loopback ports it picks, with JetStream
// storing under storeDir.
func StartNATSWithConfig(path, storeDir string, logger server.Logger) (*NATS, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats-server configuration %s: %w", path, err)
	}
	opts.ServerName, opts.Host, opts.Port, opts.HTTPHost, opts.HTTPPort = "housekeeper-secure", "127.0.0.1", server.RANDOM_PORT, "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir, opts.NoSigs = true, storeDir, true
	n := &NATS{opts: *opts, logger: logger}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// WriteNATSTLS writes a CA, a server certificate for 127.0.0.1 and a client certificate it
// signed into dir.
func WriteNATSTLS(dir string) (NATSTLS, error) {
	f := NATSTLS{
		CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTemplate := certTemplate(1, "housekeeper test CA")
	caTemplate.IsCA, caTemplate.BasicConstraintsValid, caTemplate.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	for i, leaf := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{{f.ServerCert, f.ServerKey, x509.ExtKeyUsageServerAuth}, {f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return f, err
		}
		t := certTemplate(int64(i+2), "housekeeper test "+strconv.Itoa(i))
		t.ExtKeyUsage, t.KeyUsage = []x509.ExtKeyUsage{leaf.usage}, x509.KeyUsageDigitalSignature
		t.IPAddresses, t.DNSNames = []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return f, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return f, err
		}
		if err := writePEM(leaf.cert, "CERTIFICATE", der); err != nil {
			return f, err
		}
		if err := writePEM(leaf.key, "EC PRIVATE KEY", keyDER); err != nil {
			return f, err
		}
	}
	return f, nil
}

func certTemplate(serial int64, name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
