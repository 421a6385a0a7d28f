package stack

import (
	"fmt"
	"io"
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

	env *envtest.Environment
}

// StartKube starts etcd and kube-apiserver from the control-plane cache, writing their output
// to logs, and installs the CRDs from infra/crds.
func StartKube(logs io.Writer) (*Kube, error) {
	assets, err := ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	crds, err := infra.CRDs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDInstallOptions:        envtest.CRDInstallOptions{CRDs: crds},
		ControlPlaneStartTimeout: time.Minute,
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{Out: logs, Err: logs},
			Etcd:      &envtest.Etcd{Out: logs, Err: logs},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	// Tests and the local stack create objects in bursts; the client default (5 qps) throttles them.
	cfg.QPS, cfg.Burst = 500, 1000
	return &Kube{Config: cfg, Kubeconfig: env.KubeConfig, env: env}, nil
}

// Stop stops kube-apiserver and etcd and removes their data.
func (k *Kube) Stop() error {
	return k.env.Stop()
}
