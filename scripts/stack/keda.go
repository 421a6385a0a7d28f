package stack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KEDAReading is one line of KEDA's scaler's output (test/keda): what it said of one trigger.
type KEDAReading struct {
	ScaledObject string `json:"scaledObject"`
	Consumer     string `json:"consumer"`
	Active       bool   `json:"active"`
	Lag          int64  `json:"lag"`
	// Error is the scaler's error: KEDA would count a failure towards the fallback.
	Error string `json:"error"`
}

func (r KEDAReading) String() string {
	if r.Error != "" {
		return fmt.Sprintf("%s: error %q", r.Consumer, r.Error)
	}
	return fmt.Sprintf("%s: active=%t lag=%d", r.Consumer, r.Active, r.Lag)
}

// ReadKEDA has KEDA's scaler (KEDAScalerBinary) read every trigger of the ScaledObjects in
// file once, as KEDA's operator does each polling interval.
func ReadKEDA(scaler, file string) ([]KEDAReading, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(scaler, "-f", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kedascaler: %v\n%s", err, stderr.String())
	}
	var readings []KEDAReading
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r KEDAReading
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("kedascaler's output: %v\n%s", err, out)
		}
		readings = append(readings, r)
	}
	return readings, nil
}

// KEDAOperatorBinary is test/keda/operator — KEDA's operator built from the KEDA module — as
// scripts/install-keda.sh builds it, keyed by the hash of its sources, with KEDA's CRDs from
// the same module version in crds/ beside it (KEDACRDDir).
func KEDAOperatorBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", filepath.Join("operator", "main.go")} {
		data, err := os.ReadFile(filepath.Join(root, "test", "keda", name))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir, err := installed("scripts/install-keda.sh", func(map[string]string) string {
		return filepath.Join("keda", "keda-operator-"+key)
	}, "keda-operator", "crds")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "keda-operator"), nil
}

// KEDACRDDir is the directory of KEDA's CRDs (ScaledObject, ScaledJob, TriggerAuthentication,
// ClusterTriggerAuthentication: the module's config/crd/bases/keda.sh_*.yaml) that
// scripts/install-keda.sh copies beside the operator it builds.
func KEDACRDDir() (string, error) {
	bin, err := KEDAOperatorBinary()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(bin), "crds"), nil
}

// InstallKEDACRDs installs KEDA's CRDs (KEDACRDDir) into kube and waits until they are served.
func InstallKEDACRDs(kube *Kube) error {
	dir, err := KEDACRDDir()
	if err != nil {
		return err
	}
	crds, err := envtest.InstallCRDs(kube.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true, MaxTime: time.Minute})
	if err != nil {
		return fmt.Errorf("installing KEDA's CRDs from %s: %w", dir, err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRD in %s", dir)
	}
	return nil
}

// KEDAOperatorOptions configure StartKEDAOperator; the zero value runs the installed operator
// on every namespace with KEDA's defaults.
type KEDAOperatorOptions struct {
	// Binary is the operator; empty: KEDAOperatorBinary.
	Binary string
	// Logs receives the operator's output (JSON lines, zap); nil: discarded.
	Logs io.Writer
	// Namespace is the one namespace it watches (WATCH_NAMESPACE); empty: every namespace.
	Namespace string
	// HTTPTimeout is KEDA's global HTTP timeout (KEDA_HTTP_DEFAULT_TIMEOUT): how long a
	// scaler waits for, say, NATS's monitoring endpoint; zero: KEDA's 3 s.
	HTTPTimeout time.Duration
	// LogLevel is zap's level (--zap-log-level: info, debug, or a number for more); empty: info.
	LogLevel string
}

// KEDAOperator is KEDA's operator running as a process against a Kube.
type KEDAOperator struct {
	// ProbeAddr serves the manager's /healthz and /readyz.
	ProbeAddr string

	proc *Process
	dir  string
}

// kedaClusterObjectNamespace is where the operator looks for the Secrets of
// ClusterTriggerAuthentications (KEDA_CLUSTER_OBJECT_NAMESPACE), KEDA's own namespace in a
// cluster.
const kedaClusterObjectNamespace = "keda"

// StartKEDAOperator starts KEDA's operator against kube as a process — kube's administrator
// kubeconfig, no leader election, no webhooks, no metrics adapter (test/keda/operator) — and
// waits until its manager answers /readyz; Stop stops it. KEDA's CRDs must be installed
// (InstallKEDACRDs): its manager cannot start without them.
func StartKEDAOperator(kube *Kube, opts KEDAOperatorOptions) (*KEDAOperator, error) {
	if opts.Binary == "" {
		bin, err := KEDAOperatorBinary()
		if err != nil {
			return nil, err
		}
		opts.Binary = bin
	}
	if opts.Logs == nil {
		opts.Logs = io.Discard
	}
	dir, err := os.MkdirTemp("", "housekeeper-keda-operator-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kube.Kubeconfig, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	env := append(os.Environ(),
		"WATCH_NAMESPACE="+opts.Namespace,
		"KEDA_CLUSTER_OBJECT_NAMESPACE="+kedaClusterObjectNamespace,
		"POD_NAMESPACE="+kedaClusterObjectNamespace,
		"KUBECONFIG="+kubeconfig)
	if opts.HTTPTimeout > 0 {
		env = append(env, fmt.Sprintf("KEDA_HTTP_DEFAULT_TIMEOUT=%d", opts.HTTPTimeout.Milliseconds()))
	}
	level := opts.LogLevel
	if level == "" {
		level = "info"
	}
	k, err := OnFreePort(func(port int) (*KEDAOperator, error) {
		probe := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(opts.Binary, "--kubeconfig", kubeconfig, "--health-probe-bind-address", probe,
			"--metrics-bind-address", "0", "--zap-log-level", level, "--zap-encoder", "json", "--zap-time-encoding", "rfc3339nano")
		cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, opts.Logs, opts.Logs, dir
		p, err := StartProcess(cmd)
		if err != nil {
			return nil, err
		}
		k := &KEDAOperator{ProbeAddr: probe, proc: p, dir: dir}
		if err := k.awaitReady(time.Minute); err != nil {
			p.Stop()
			return nil, err
		}
		return k, nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("keda-operator: %w", err)
	}
	return k, nil
}

// awaitReady polls the manager's /readyz until it answers 200.
func (k *KEDAOperator) awaitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := "not listening"
	for time.Now().Before(deadline) {
		if k.proc.Exited() {
			return fmt.Errorf("exited (%s) before it was ready (see its log)", k.proc.State())
		}
		resp, err := client.Get("http://" + k.ProbeAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %s", timeout, last)
}

// Exited is closed when the operator has exited, which it does only when stopped or failing.
func (k *KEDAOperator) Exited() <-chan struct{} { return k.proc.Done() }

// Stop stops the operator (SIGTERM: its manager stops its controllers; SIGKILL after 10 s) and
// says how it ended if not cleanly.
func (k *KEDAOperator) Stop() error {
	defer os.RemoveAll(k.dir)
	exitedBefore := k.proc.Exited()
	k.proc.Stop()
	state := k.proc.State()
	switch {
	case exitedBefore:
		return fmt.Errorf("keda-operator had exited before it was stopped: %s", state)
	case state != nil && !state.Success():
		return fmt.Errorf("keda-operator did not stop cleanly: %s", state)
	}
	return nil
}
