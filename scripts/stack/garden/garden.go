// Package garden runs a Gardener garden and the parts of gardenlet that install an extension into
// a seed, in-process, from the gardener module go.mod pins:
//
//   - Start: the garden — kube-apiserver and etcd from housekeeper's control-plane cache, and
//     gardener-apiserver in-process (gardener's own test/envtest), with the admission plugins that
//     need a whole landscape turned off, as upstream's gardenlet integration tests run it;
//   - StartGardenlet: gardenlet's ControllerInstallation reconciler (ReconcileInstallation renders
//     an extension's chart into a ManagedResource in the seed), its ControllerInstallation care
//     controller (the ManagedResource's conditions become the installation's) and, on request,
//     its NetworkPolicy controller (the allow-to-* policies of extension namespaces);
//   - what both need of the gardener module: its seed CRDs, housekeeper's registration decoded
//     with the garden's scheme, and the conditions as an operator reads them.
//
// gardener-resource-manager, which applies the ManagedResources, is package grm.
//
// It is its own package, not a file of package stack, so that gardener-apiserver and gardenlet
// are compiled only into the tests that run them.
package garden

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gardener/gardener/pkg/client/kubernetes"
	gardenerenvtest "github.com/gardener/gardener/test/envtest"
	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Namespace is the garden namespace, in the garden (gardenlet's copies of generated secrets) and
// in every seed (the ManagedResources of ControllerInstallations).
const Namespace = "garden"

// DefaultWorkloadIdentityIssuer is the iss claim of the garden's workload identity tokens when
// Options.WorkloadIdentityIssuer is empty.
const DefaultWorkloadIdentityIssuer = "https://issuer.garden.housekeeper.test"

// Options configure Start.
type Options struct {
	// Dir holds the garden's files (the key gardener-apiserver signs workload identity tokens
	// with); required.
	Dir string
	// Output receives the output of kube-apiserver, etcd and gardener-apiserver (in-process, it
	// takes klog's output: the whole process's); nil: discarded.
	Output io.Writer
	// WorkloadIdentityIssuer is the iss claim of the workload identity tokens gardener-apiserver
	// issues; "": DefaultWorkloadIdentityIssuer.
	WorkloadIdentityIssuer string
}

// A Garden is a running garden cluster.
type Garden struct {
	// Config reaches the garden's API (Kubernetes' and Gardener's) as an administrator.
	Config *rest.Config
	// Client is a client of it with the garden's scheme.
	Client client.Client

	env      *gardenerenvtest.GardenerTestEnvironment
	stopOnce sync.Once
	stopErr  error
}

// Start starts the garden and returns once gardener-apiserver serves Gardener's APIs and the
// garden namespace exists.
func Start(opts Options) (*Garden, error) {
	if opts.Dir == "" {
		return nil, errors.New("garden: no directory")
	}
	assets, err := stack.ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	out := cmp.Or(opts.Output, io.Discard)
	issuer := cmp.Or(opts.WorkloadIdentityIssuer, DefaultWorkloadIdentityIssuer)
	signingKey := filepath.Join(opts.Dir, "workload-identity-signing.key")
	if err := writeSigningKey(signingKey); err != nil {
		return nil, fmt.Errorf("garden: %w", err)
	}
	env := &gardenerenvtest.GardenerTestEnvironment{
		Environment: &envtest.Environment{
			BinaryAssetsDirectory:    assets,
			ControlPlaneStartTimeout: 2 * time.Minute,
			ControlPlane: envtest.ControlPlane{
				APIServer: &envtest.APIServer{Out: out, Err: out},
				Etcd:      &envtest.Etcd{Out: out, Err: out},
			},
		},
		GardenerAPIServer: &gardenerenvtest.GardenerAPIServer{
			// As upstream's gardenlet integration tests: no admission plugins that need a whole
			// landscape (cloud profiles, DNS, quotas). It issues WorkloadIdentity tokens, signed
			// with a key of the garden's own.
			Args: []string{"--disable-admission-plugins=DeletionConfirmation,Bastion,ResourceReferenceManager,ExtensionValidator,ShootDNS,ShootQuotaValidator,ShootTolerationRestriction,ShootValidator,ShootMutator",
				"--workload-identity-token-issuer=" + issuer, "--workload-identity-signing-key-file=" + signingKey},
			Out: out,
			Err: out,
		},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("garden: starting: %w", err)
	}
	g := &Garden{Config: cfg, env: env}
	cfg.QPS, cfg.Burst = 500, 1000
	if g.Client, err = client.New(cfg, client.Options{Scheme: kubernetes.GardenScheme}); err != nil {
		return nil, errors.Join(fmt.Errorf("garden: %w", err), g.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return nil, errors.Join(fmt.Errorf("garden: namespace %s: %w", Namespace, err), g.Stop())
	}
	return g, nil
}

// Stop stops gardener-apiserver, kube-apiserver and etcd; again, the same error.
func (g *Garden) Stop() error {
	g.stopOnce.Do(func() { g.stopErr = g.env.Stop() })
	return g.stopErr
}

// writeSigningKey writes a new RSA key for gardener-apiserver's workload identity tokens.
func writeSigningKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

// ModuleDir is where the gardener module's source is (its seed CRDs, its chart assets).
func ModuleDir() (string, error) {
	root, err := stack.RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "list", "-C", root, "-m", "-f", "{{.Dir}}", "github.com/gardener/gardener").Output()
	if err != nil {
		return "", fmt.Errorf("locating the gardener module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// The CRDs of the gardener module's example/seed-crds, by name.
const (
	// ManagedResourceCRD is gardener-resource-manager's ManagedResource.
	ManagedResourceCRD = "resources.gardener.cloud_managedresources"
	// ClusterCRD is extensions.gardener.cloud's Cluster, which gardenlet installs in every seed;
	// its NetworkPolicy controller watches Clusters.
	ClusterCRD = "extensions.gardener.cloud_clusters"
)

// ExtensionCRDs are the CRDs a seed has for what an extension's chart deploys besides
// gardenlet's own objects: the ManagedResource gardenlet renders it into, the VPA's and the
// Prometheus Operator's PodMonitor and PrometheusRule (a seed runs both).
var ExtensionCRDs = []string{ManagedResourceCRD, "autoscaling.k8s.io_verticalpodautoscalers",
	"monitoring.coreos.com_podmonitors", "monitoring.coreos.com_prometheusrules"}

// InstallSeedCRDs installs the named CRDs of the gardener module's example/seed-crds into the
// cluster and waits until they are served.
func InstallSeedCRDs(cfg *rest.Config, names ...string) error {
	dir, err := ModuleDir()
	if err != nil {
		return err
	}
	var paths []string
	for _, name := range names {
		paths = append(paths, filepath.Join(dir, "example", "seed-crds", "10-crd-"+name+".yaml"))
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: time.Minute}); err != nil {
		return fmt.Errorf("installing the seed CRDs %v: %w", names, err)
	}
	return nil
}

// ZapLogger is a human-readable zap logger writing everything (debug and up) to w: the log of
// one in-process component (gardenlet, gardener-resource-manager, nats-server).
func ZapLogger(w io.Writer) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.DebugLevel))
}

// Logger is ZapLogger as logr, which the controllers take.
func Logger(w io.Writer) logr.Logger { return zapr.NewLogger(ZapLogger(w)) }
