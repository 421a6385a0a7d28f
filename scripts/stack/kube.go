package stack

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/housekeeper-dev/housekeeper/infra"
)

// Kube is a running kube-apiserver with its etcd, with housekeeper's CRDs installed.
type Kube struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Kubeconfig is Config as a kubeconfig file's content, for kubectl.
	Kubeconfig []byte

	env     *envtest.Environment
	certDir string
	etcdDir string
	node    *nodeNetwork // ForNode's addressing, nil without it
}

// StartKube starts etcd and kube-apiserver from the control-plane cache, writing their output
// to logs, and installs the CRDs from infra/crds. ForNode() prepares it for a node (StartNode).
func StartKube(logs io.Writer, opts ...KubeOption) (*Kube, error) {
	var o kubeOptions
	for _, opt := range opts {
		opt(&o)
	}
	assets, err := ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	crds, err := infra.CRDs()
	if err != nil {
		return nil, err
	}
	// Our own serving-cert directory: a restarted API server keeps its certificates, so
	// clients configured before the restart still trust it.
	certDir, err := os.MkdirTemp("", "housekeeper-apiserver-certs-")
	if err != nil {
		return nil, err
	}
	// And our own etcd data directory, which envtest leaves in place when etcd stops, so a
	// killed etcd restarts with its data.
	etcdDir, err := os.MkdirTemp("", "housekeeper-etcd-")
	if err != nil {
		_ = os.RemoveAll(certDir)
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDInstallOptions:        envtest.CRDInstallOptions{CRDs: crds},
		ControlPlaneStartTimeout: time.Minute,
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{CertDir: certDir, Out: logs, Err: logs},
			Etcd:      &envtest.Etcd{DataDir: etcdDir, Out: logs, Err: logs},
		},
	}
	var node *nodeNetwork
	if o.forNode {
		if node, err = prepareForNode(env.ControlPlane.APIServer, certDir); err != nil {
			_ = os.RemoveAll(certDir)
			_ = os.RemoveAll(etcdDir)
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		node.release()
		_ = os.RemoveAll(certDir)
		_ = os.RemoveAll(etcdDir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	// Tests and the local stack create objects in bursts; the client default (5 qps) throttles them.
	cfg.QPS, cfg.Burst = 500, 1000
	return &Kube{Config: cfg, Kubeconfig: env.KubeConfig, env: env, certDir: certDir, etcdDir: etcdDir, node: node}, nil
}

// RestartAPIServer kills kube-apiserver (SIGKILL: a graceful stop waits for every open
// watch) and starts it again on the same address with the same certificates; etcd and its
// data stay.
//
// As KillEtcd, it starts a new envtest.APIServer carrying the old one's configuration (binary,
// certificate directory, serving address and authentication, so clients keep trusting it and
// their credentials stay valid, etcd, output, timeouts and the arguments Configure() set), and
// only once the killed process is reaped: envtest's Stop after a kill races its own reaper, and
// a process still exiting (its other threads, its listening socket) can hold the port the new
// one binds.
func (k *Kube) RestartAPIServer() error {
	old := k.env.ControlPlane.APIServer
	if err := killProcessesWithArg(k.certDir); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	// Only bookkeeping: the process is reaped whatever this says.
	_ = old.Stop()
	fresh := &envtest.APIServer{Path: old.Path, CertDir: k.certDir, SecureServing: old.SecureServing, EtcdURL: old.EtcdURL,
		Out: old.Out, Err: old.Err, StartTimeout: old.StartTimeout, StopTimeout: old.StopTimeout}
	// The arguments set through Configure (ForNode's among them), as they are.
	*fresh.Configure() = *old.Configure()
	if err := fresh.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	k.env.ControlPlane.APIServer = fresh
	return nil
}

// KillEtcd kills etcd (SIGKILL) and starts it again on the same address with its data; the
// API server reconnects by itself.
//
// The etcd started again is a new envtest.Etcd on the old one's address, started once the killed
// one is reaped: envtest's Stop after a kill races its own reaper, and the old one's bookkeeping
// may still say "running" (its Start then starts nothing) or fail to signal a process group
// already gone ("no such process"), which left etcd down and the API server with it for a
// minute and a half in a fault run.
func (k *Kube) KillEtcd() error {
	old := k.env.ControlPlane.Etcd
	if err := killProcessesWithArg(k.etcdDir); err != nil {
		return fmt.Errorf("killing etcd: %w", err)
	}
	// Only to reap: the process is gone whatever this says.
	_ = old.Stop()
	fresh := &envtest.Etcd{Path: old.Path, DataDir: k.etcdDir, URL: old.URL, Out: old.Out, Err: old.Err,
		StartTimeout: old.StartTimeout, StopTimeout: old.StopTimeout}
	if err := fresh.Start(); err != nil {
		return fmt.Errorf("starting etcd again: %w", err)
	}
	k.env.ControlPlane.Etcd = fresh
	return nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (k *Kube) Stop() error {
	defer k.node.release()
	defer os.RemoveAll(k.certDir)
	defer os.RemoveAll(k.etcdDir)
	return k.env.Stop()
}

// killProcessesWithArg SIGKILLs the processes whose command line mentions arg and waits until
// each is reaped (its /proc entry gone), which is once every thread has exited and released
// what the process held (its listening sockets, its data directory's lock) and envtest's own
// Wait has collected it. A zombie is not enough: its other threads may still be exiting.
func killProcessesWithArg(arg string) error {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return err
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(arg)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		started := procStartTime(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		gone := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			// Gone, or its pid already another process's.
			if t := procStartTime(pid); t == "" || t != started {
				gone = true
				break
			}
		}
		if !gone {
			return fmt.Errorf("process %d (%s) was not reaped within 30s of its SIGKILL", pid, arg)
		}
	}
	return nil
}

// procStartTime is when process pid started (field 22 of /proc/<pid>/stat, in clock ticks since
// boot), which tells it apart from a later process given the same pid; "" if there is none.
func procStartTime(pid int) string {
	fields := procStat(pid)
	if len(fields) < 20 {
		return ""
	}
	return fields[19] // field 22 overall: fields[0] is field 3 (the state)
}
