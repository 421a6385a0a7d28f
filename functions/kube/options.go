package kube

import (
	"flag"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Default client limits. They are high on purpose: in a burst the client limiter must not be
// what a function waits on. API Priority and Fairness (infra/apf) protects the API server.
const (
	DefaultQPS   = 200
	DefaultBurst = 400
)

// Options say how a process reaches the Kubernetes API.
type Options struct {
	// Kubeconfig is the kubeconfig file; empty means the pod's service account.
	Kubeconfig string
	// QPS and Burst limit the client's requests (watches are not limited). A negative QPS
	// turns the client limiter off.
	QPS   float64
	Burst int
}

// BindFlags registers the options as flags on fs (and so as HOUSEKEEPER_* variables).
func (o *Options) BindFlags(fs *flag.FlagSet, kubeconfigDefault string) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", kubeconfigDefault, "kubeconfig file; empty: in-cluster")
	fs.Float64Var(&o.QPS, "kube-qps", DefaultQPS, "Kubernetes API requests per second (negative: no client limit)")
	fs.IntVar(&o.Burst, "kube-burst", DefaultBurst, "Kubernetes API requests allowed at once above kube-qps")
}

// Validate says what is wrong with the client limits.
func (o Options) Validate() error {
	if o.QPS >= 0 && (o.QPS == 0 || o.Burst <= 0) {
		return fmt.Errorf("--kube-qps %v and --kube-burst %d: both must be positive (or kube-qps negative for no limit)", o.QPS, o.Burst)
	}
	return nil
}

// Config loads the REST config the options describe.
func (o Options) Config() (*rest.Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var cfg *rest.Config
	var err error
	if o.Kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	return cfg, nil
}
