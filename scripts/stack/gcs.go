package stack

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// GCSProject is the project of the local GCS server's service account key.
const GCSProject = "housekeeper-local"

// GCSRegion is the location the local GCS server reports for its buckets; the stack's gcp
// BackupBuckets use it as spec.region.
const GCSRegion = "europe-west1"

// GCS is a running fake-gcs-server with its memory backend. (Its filesystem backend keeps an
// object as a file named like it, so it cannot hold both "a" and "a/1" — which is what
// etcd-backup-restore's chunked upload writes: the chunks under <snapshot>/, composed into
// <snapshot>.) It serves the JSON API (and its batch endpoint) over plain http, which
// housekeeper's and etcd-backup-restore's GCS clients use unauthenticated, as they do with
// every http endpoint; it checks no credentials.
type GCS struct {
	// URL is the server's base URL, http://127.0.0.1:<port>; Endpoint the JSON API's,
	// URL + "/storage/v1/" — a gcp BackupBucket's providerConfig.store.endpointOverride and
	// etcd-backup-restore's --store-endpoint-override.
	URL, Endpoint string
	Port          int

	proc *Process
}

// GCSBinary is fake-gcs-server installed by scripts/install-gcs.sh at the version pinned in
// scripts/versions.env.
func GCSBinary() (string, error) {
	dir, err := installed("scripts/install-gcs.sh", func(v map[string]string) string {
		return filepath.Join("gcs", "fake-gcs-server-"+v["FAKE_GCS_SERVER_VERSION"])
	}, "fake-gcs-server")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "fake-gcs-server"), nil
}

// StartGCS starts fake-gcs-server on a free loopback port, writing its log to logs. What it
// holds is gone when it stops.
func StartGCS(logs io.Writer) (*GCS, error) {
	bin, err := GCSBinary()
	if err != nil {
		return nil, err
	}
	return OnFreePort(func(port int) (*GCS, error) { return startGCS(bin, port, logs) })
}

func startGCS(bin string, port int, logs io.Writer) (*GCS, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	base := "http://" + addr
	cmd := exec.Command(bin,
		"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		"-backend", "memory",
		// Upload URLs it hands out must name this address, not the name it would guess.
		"-external-url", base, "-public-host", addr,
		"-location", GCSRegion, "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	if err := proc.AwaitListening("fake-gcs-server", addr); err != nil {
		return nil, err
	}
	healthy := func() (bool, string, error) {
		if err := httpOK(base + "/_internal/healthcheck"); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}
	if err := Poll(30*time.Second, 50*time.Millisecond, "fake-gcs-server's health check", healthy); err != nil {
		proc.Stop()
		return nil, err
	}
	return &GCS{URL: base, Endpoint: base + "/storage/v1/", Port: port, proc: proc}, nil
}

// Stop terminates the server and waits for it to exit.
func (s *GCS) Stop() { s.proc.Stop() }

// GCSServiceAccountKey is a service account key of project GCSProject, a serviceaccount.json,
// with a private key made for it: fake-gcs-server checks no credentials, but housekeeper and
// etcd-backup-restore check the key's form.
func GCSServiceAccountKey() ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     GCSProject,
		"private_key_id": "local",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "housekeeper@" + GCSProject + ".iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      "https://oauth2.googleapis.com/token",
	})
}
