package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Cluster is the cluster name of the run's events.
const Cluster = "faults"

// functionNames are the functions run as processes.
var functionNames = []string{"bucket", "entry", "purge"}

// rig is a running stack with its processes.
type rig struct {
	cfg        Config
	rand       *rand.Rand
	kube       *stack.Kube
	nats       *stack.NATS
	azurite    *stack.Azurite
	kubeconfig string
	client     client.Client
	nc         *nats.Conn
	js         jetstream.JetStream
	localRoot  string

	bridge  *process
	workers []*process // replicas of every function

	mu     sync.Mutex // guards faults
	faults map[string]int
}

// Run builds the binaries, starts the stack, runs the workload and the faults, waits for
// convergence and checks the invariants. The error is about running the suite; violations are
// in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "fault suite: seed %d, logs and stores in %s\n", cfg.Seed, cfg.Dir)
	r := &rig{cfg: cfg, rand: rand.New(rand.NewPCG(cfg.Seed, 42)), faults: map[string]int{}, localRoot: filepath.Join(cfg.Dir, "buckets")}
	bin, err := build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	stop, err := r.startComponents(bin)
	defer stop()
	if err != nil {
		return nil, err
	}

	w := newWorkload(r)
	start := time.Now()
	var wg sync.WaitGroup
	workloadErr := make(chan error, 1)
	faultsCtx, stopFaults := context.WithTimeout(ctx, cfg.FaultPeriod)
	defer stopFaults()
	wg.Go(func() { workloadErr <- w.run(ctx) })
	wg.Go(func() { r.injectFaults(faultsCtx, w) })
	wg.Wait()
	if err := <-workloadErr; err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	lastFault := time.Now()
	r.heal()
	fmt.Fprintf(cfg.Out, "workload and faults done after %s; waiting for convergence …\n", time.Since(start).Round(time.Second))

	report := &Report{Config: cfg, Faults: r.faults, Workload: w.summary()}
	deadline := time.Now().Add(cfg.Converge)
	for {
		results := w.check(ctx, false)
		if allPass(results) {
			report.Converged = time.Since(lastFault)
			break
		}
		if time.Now().After(deadline) {
			report.Converged = -1
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, p := range append([]*process{r.bridge}, r.workers...) {
		p.stop() // flush and close logs before they are searched
	}
	report.Invariants = w.check(ctx, true)
	return report, nil
}

// build compiles the two binaries into the run's directory.
func build(ctx context.Context, cfg Config) (string, error) {
	root, err := stack.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cfg.Dir, "bin")
	fmt.Fprintln(cfg.Out, "building housekeeper and housekeeper-bridge …")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./functions/cmd/housekeeper", "./bridge/cmd/housekeeper-bridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// startComponents starts kube-apiserver, nats-server and Azurite here, and the bridge and the
// functions as processes.
func (r *rig) startComponents(bin string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	logFile := func(name string) (*os.File, error) { return os.Create(filepath.Join(r.cfg.Dir, name)) }
	kubeLog, err := logFile("kube-apiserver-etcd.log")
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = kubeLog.Close() })
	if r.kube, err = stack.StartKube(kubeLog); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = r.kube.Stop() })
	r.kubeconfig = filepath.Join(r.cfg.Dir, "kubeconfig")
	if err := os.WriteFile(r.kubeconfig, r.kube.Kubeconfig, 0o600); err != nil {
		return stop, err
	}
	natsLog, err := logFile("nats-server.log")
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = natsLog.Close() })
	natsLogger := zap.New(zapcoreFor(natsLog))
	if r.nats, err = stack.StartNATS(filepath.Join(r.cfg.Dir, "jetstream"), stack.NATSLogger(natsLogger)); err != nil {
		return stop, err
	}
	stops = append(stops, r.nats.Stop)
	azuriteLog, err := logFile("azurite.log")
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = azuriteLog.Close() })
	if r.azurite, err = stack.StartAzurite(azuriteLog); err != nil {
		return stop, err
	}
	stops = append(stops, r.azurite.Stop)

	if r.client, err = kube.NewClient(r.kube.Config); err != nil {
		return stop, err
	}
	if r.nc, err = nats.Connect(r.nats.URL, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond)); err != nil {
		return stop, err
	}
	stops = append(stops, r.nc.Close)
	if r.js, err = jetstream.New(r.nc); err != nil {
		return stop, err
	}
	env := []string{"HOUSEKEEPER_NATS_URL=" + r.nats.URL, "HOUSEKEEPER_LOG_FORMAT=json", "HOUSEKEEPER_CLUSTER=" + Cluster}
	// The setup first: the streams and the consumers, which the processes only bind to.
	setup := exec.Command(filepath.Join(bin, "housekeeper"), "setup", "--max-deliver", "200")
	setup.Env = append(os.Environ(), env...)
	if out, err := setup.CombinedOutput(); err != nil {
		return stop, fmt.Errorf("housekeeper setup: %v\n%s", err, out)
	}
	r.bridge, err = newProcess(r.cfg.Dir, "bridge", []string{filepath.Join(bin, "housekeeper-bridge"),
		"--kubeconfig", r.kubeconfig, "--leader-elect=false", "--health-addr", "127.0.0.1:0", "--resync-period", "1m"}, env)
	if err != nil {
		return stop, err
	}
	for _, fn := range functionNames {
		for i := range r.cfg.Replicas {
			p, err := newProcess(r.cfg.Dir, fn+"-"+strconv.Itoa(i), []string{filepath.Join(bin, "housekeeper"), "function", fn,
				"--kubeconfig", r.kubeconfig, "--local-root", r.localRoot, "--addr", "127.0.0.1:0",
				"--backoff-base", "200ms", "--backoff-max", "5s", "--concurrency", "8"}, env)
			if err != nil {
				return stop, err
			}
			r.workers = append(r.workers, p)
		}
	}
	for _, p := range append([]*process{r.bridge}, r.workers...) {
		if err := p.start(); err != nil {
			return stop, err
		}
		stops = append(stops, p.stop)
	}
	return stop, nil
}

// heal restarts whatever a fault left stopped.
func (r *rig) heal() {
	if err := r.nats.Start(); err != nil {
		fmt.Fprintf(r.cfg.Out, "restarting nats-server: %v\n", err)
	}
	for _, p := range append([]*process{r.bridge}, r.workers...) {
		if p.exited() {
			_ = p.start()
		}
	}
}
