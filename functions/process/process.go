// Package process is the one start of every housekeeper process — the bridge, the functions
// and the forwarders: structured logs (with client-go's and controller-runtime's routed into
// them), a metrics registry with the Go and process collectors, the instrumented Kubernetes
// client, and the NATS connection under the process's own identity with the streams checked.
// Each main parses its flags, calls Start, and runs its work; they all read the same.
package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// DefaultAddr is where every process serves /healthz, /readyz and /metrics.
const DefaultAddr = ":8080"

// Flags are the flags every process has, under the same names.
type Flags struct {
	Log logging.Options
	// Addr is the address of /healthz, /readyz, /metrics (and, for a function in http mode,
	// its events).
	Addr string
	// CPUProfile, if set, is a file the process writes a CPU profile of its life to when it
	// ends (pprof format): what make bench keeps of each process under a burst. A file, not an
	// endpoint: nothing more listens in production.
	CPUProfile string
}

// BindFlags registers the log flags and --addr on fs; usage describes what --addr serves.
func (f *Flags) BindFlags(fs *flag.FlagSet, usage string) {
	f.Log.BindFlags(fs)
	fs.StringVar(&f.Addr, "addr", DefaultAddr, usage)
	fs.StringVar(&f.CPUProfile, "cpu-profile", "", "write a CPU profile (pprof) of the process's life to this file when it ends")
}

// Spec is what a process needs.
type Spec struct {
	// Name is the process's name: its NATS connection name, e.g. housekeeper-bucket.
	Name  string
	Flags Flags
	// Kube, if set, gives the process a Kubernetes configuration and client.
	Kube *kube.Options
	// NATS, if set, connects the process as Identity.
	NATS     *natsconn.Options
	Identity string
	// RequireStreams waits until `housekeeper setup` created the streams (NATS only).
	RequireStreams bool
}

// Process is a started process: what its work is built from.
type Process struct {
	Log     *zap.Logger
	Metrics *prometheus.Registry
	// KubeConfig and Client are nil without Spec.Kube; KubeConfig is instrumented (requests
	// counted in Metrics).
	KubeConfig *rest.Config
	Client     client.Client
	// NC and JetStream are nil without Spec.NATS.
	NC        *nats.Conn
	JetStream jetstream.JetStream
	// Startup times the start, from Start to the first event acknowledged.
	Startup *Startup

	profile *os.File // the CPU profile being written, nil without Flags.CPUProfile
}

// Start starts what spec asks for. Close releases it.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	log, err := logging.New(spec.Flags.Log)
	if err != nil {
		return nil, err
	}
	logging.RouteLibraries(log)
	reg := prometheus.NewRegistry()
	p := &Process{Log: log, Metrics: reg, Startup: newStartup(log, reg)}
	p.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := p.startProfile(spec.Flags.CPUProfile); err != nil {
		return nil, err
	}
	if err := p.start(ctx, spec); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Process) start(ctx context.Context, spec Spec) error {
	if spec.Kube != nil {
		cfg, err := spec.Kube.Config()
		if err != nil {
			return err
		}
		p.KubeConfig = kube.Instrument(cfg, p.Metrics)
		if p.Client, err = kube.NewClient(p.KubeConfig); err != nil {
			return err
		}
		p.Startup.Mark("kube_client")
	}
	if spec.NATS == nil {
		return nil
	}
	if spec.Identity == "" {
		return errors.New("a process that connects to NATS needs an identity")
	}
	nc, err := natsconn.Connect(*spec.NATS, spec.Identity, spec.Name, p.Log)
	if err != nil {
		return err
	}
	p.NC = nc
	if p.JetStream, err = natsconn.NewJetStream(nc, p.Log); err != nil {
		return err
	}
	p.Startup.Mark("nats_connect")
	if spec.RequireStreams {
		if err := natsconn.RequireStreams(ctx, p.JetStream, p.Log); err != nil {
			return err
		}
		p.Startup.Mark("streams_checked")
	}
	return nil
}

// NATSReady is a readiness check: the process is connected to NATS (or does not use it).
func (p *Process) NATSReady() error {
	if p.NC != nil && !p.NC.IsConnected() {
		return errors.New("not connected to NATS")
	}
	return nil
}

func (p *Process) startProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	p.profile = f
	return nil
}

// Close closes the NATS connection, ends the CPU profile and flushes the log.
func (p *Process) Close() {
	if p.NC != nil {
		p.NC.Close()
	}
	if p.profile != nil {
		pprof.StopCPUProfile()
		if err := p.profile.Close(); err != nil {
			p.Log.Error("writing the CPU profile", zap.Error(err))
		}
	}
	_ = p.Log.Sync()
}
