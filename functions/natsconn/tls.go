package natsconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the TLS material of a secured nats-server: a CA, the server's certificate and
// a client certificate, both signed by the CA.
type TLSFiles struct{ CA, ServerCert, ServerKey, ClientCert, ClientKey string }

// WriteTLS writes into dir a CA, a server certificate for hosts (names or IP addresses) and a
// client certificate, both signed by the CA and valid for a year: TLS for a local or test
// stack (`housekeeper nats-auth --tls-hosts`). In production, certificates come from your PKI.
func WriteTLS(dir string, hosts []string) (TLSFiles, error) {
	f := TLSFiles{
		CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTemplate := certTemplate(1, "housekeeper NATS CA")
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
		cert, key, name string
		usage           x509.ExtKeyUsage
	}{{f.ServerCert, f.ServerKey, "nats-server", x509.ExtKeyUsageServerAuth}, {f.ClientCert, f.ClientKey, "housekeeper", x509.ExtKeyUsageClientAuth}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return f, err
		}
		t := certTemplate(int64(i+2), leaf.name)
		t.ExtKeyUsage, t.KeyUsage = []x509.ExtKeyUsage{leaf.usage}, x509.KeyUsageDigitalSignature
		if leaf.usage == x509.ExtKeyUsageServerAuth {
			for _, h := range hosts {
				if ip := net.ParseIP(h); ip != nil {
					t.IPAddresses = append(t.IPAddresses, ip)
				} else {
					t.DNSNames = append(t.DNSNames, h)
				}
			}
		}
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
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
	}
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
