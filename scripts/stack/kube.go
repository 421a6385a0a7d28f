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
// data stay. Stop only reaps the killed process, and may race envtest's own reaper into "process
// already finished" (as KillEtcd's did): its answer does not matter. Start sets up a new process
// state, so stale bookkeeping cannot make it start nothing.
func (k *Kube) RestartAPIServer() error {
	if err := killProcessesWithArg(k.certDir); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	_ = k.env.ControlPlane.APIServer.Stop()
	if err := k.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// KillEtcd kills etcd (SIGKILL) and starts it again on the same address with its data; the
// API server reconnects by itself.
//
// The etcd started again is a new envtest.Etcd on the old one's address: envtest's Stop after a
// kill races its own reaper, and the old one's bookkeeping may still say "running" (its Start
// then starts nothing) or fail to signal a process group already gone ("no such process"), which
// left etcd down and the API server with it for a minute and a half in a fault run.
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
// they are gone.
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
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(filepath.Dir(p)); err != nil {
				break
			}
			if stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
				break // a zombie until envtest reaps it
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}
