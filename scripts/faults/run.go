package faults

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Cluster is the cluster name of the run's events.
const Cluster = "faults"

// functionNames are the functions run as processes: Gardener's.
var functionNames = all.NamesOf(all.Gardener)

// rig is a running stack with its processes.
type rig struct {
	cfg             Config
	plan            *faultPlan
	kube            *stack.Kube
	natsURL         string
	azuriteEndpoint string
	// kubeconfig is housekeeper's: it reaches the API server through kubeProxy, which takes the
	// API server away from housekeeper alone. The workload and the checks use client directly.
	kubeconfig string
	kubeProxy  *stack.OutageProxy
	client     client.Client
	nc         *nats.Conn
	js         jetstream.JetStream
	localRoot  string

	nats    []*process // one, or the cluster's three (named by their server names)
	natsMon []string   // their monitoring URLs
	azurite *process
	bridge  *process
	workers []*process // replicas of every function

	workload *workload

	mu     sync.Mutex // guards faults, recovered and windows
	faults map[string]int
	// recovered holds, per NATS fault kind, how long JetStream took to answer with every
	// leader elected, from the fault's start.
	recovered map[string][]time.Duration
	// windows are the times faults were in effect, from the first blow to the recovery.
	windows []window
	// leases follow the bridge's Lease around each outage of the API server.
	leases []*leaseWatch
}

type window struct {
	from, to time.Time
	kind     string
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
	fmt.Fprintf(cfg.Out, "fault suite: seed %d (the same -seed draws the same workload and faults), logs and stores in %s\n", cfg.Seed, cfg.Dir)
	r := &rig{cfg: cfg, plan: newFaultPlan(cfg), faults: map[string]int{}, recovered: map[string][]time.Duration{}, localRoot: filepath.Join(cfg.Dir, "buckets")}
	bin, err := build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	stop, err := r.startComponents(bin)
	defer stop()
	if err != nil {
		return nil, err
	}

	w := newWorkload(r)
	r.workload = w
	watch := newPurgeWatch(w)
	start := time.Now()
	var wg sync.WaitGroup
	workloadErr := make(chan error, 1)
	workloadDone := make(chan struct{})
	faultsCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wg.Go(func() { workloadErr <- w.run(ctx); close(workloadDone) })
	injectorDone := make(chan struct{})
	wg.Go(func() { r.injectFaults(faultsCtx); close(injectorDone) })
	wg.Go(func() { watch.run(watchCtx) })
	wg.Go(func() { r.endFaults(faultsCtx, stopFaults, start, workloadDone, w) })
	<-workloadDone
	if err := <-workloadErr; err != nil {
		stopFaults()
		stopWatch()
		wg.Wait()
		return nil, fmt.Errorf("workload: %w", err)
	}
	<-faultsCtx.Done()
	// A fault in flight finishes its own restart; healing alongside it would start a second copy.
	<-injectorDone
	lastFault := time.Now()
	r.heal()
	fmt.Fprintf(cfg.Out, "workload and faults done after %s; waiting for convergence …\n", time.Since(start).Round(time.Second))

	report := &Report{Config: cfg, Faults: r.faults, Recovered: r.recovered, Workload: w.summary()}
	deadline := time.Now().Add(cfg.Converge)
	for {
		results := w.check(ctx, watch, false)
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
	stopWatch()
	wg.Wait()
	for _, p := range r.housekeeper() {
		p.close() // flush and close logs before they are searched
	}
	report.Invariants = w.check(ctx, watch, true)
	report.Outages = outagesOf(watch.stats(r.faultWindows()))
	return report, nil
}

// endFaults ends the fault period once it has lasted cfg.FaultPeriod, the workload is done and
// the last deleted entry's purge is due and under way: faults overlap deletions and purges.
func (r *rig) endFaults(ctx context.Context, stopFaults func(), start time.Time, workloadDone <-chan struct{}, w *workload) {
	defer stopFaults()
	select {
	case <-ctx.Done():
		return
	case <-workloadDone:
	}
	wait := max(time.Until(start.Add(r.cfg.FaultPeriod)), time.Until(w.lastDue().Add(3*time.Second)))
	select {
	case <-ctx.Done():
	case <-time.After(wait):
	}
	// A round whose faults took long (elections, a quorum loss) is finished: every kind once.
	for !r.everyKindInjected() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// everyKindInjected says every kind of fault of the run was injected at least once.
func (r *rig) everyKindInjected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, kind := range FaultKinds(r.cfg) {
		if r.faults[kind] == 0 {
			return false
		}
	}
	return true
}

// build compiles housekeeper's binaries with the race detector into the run's directory.
func build(ctx context.Context, cfg Config) (string, error) {
	root, err := stack.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cfg.Dir, "bin")
	fmt.Fprintln(cfg.Out, "building housekeeper and housekeeper-bridge (-race) …")
	if err := stack.BuildHousekeeper(ctx, root, bin, true); err != nil {
		return "", err
	}
	return bin, nil
}

// startComponents starts kube-apiserver and etcd here, and nats-server, Azurite, the bridge
// and the functions as processes.
func (r *rig) startComponents(bin string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	kubeLog, err := os.Create(filepath.Join(r.cfg.Dir, "kube-apiserver-etcd.log"))
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = kubeLog.Close() })
	if r.kube, err = stack.StartKube(kubeLog); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = r.kube.Stop() })
	// The API server's direct kubeconfig, for kubectl on a kept run; housekeeper's goes through
	// the proxy (the serving certificate is for 127.0.0.1, whatever the port).
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, "kubeconfig"), r.kube.Kubeconfig, 0o600); err != nil {
		return stop, err
	}
	apiServer, err := url.Parse(r.kube.Config.Host)
	if err != nil || apiServer.Host == "" {
		return stop, fmt.Errorf("the API server's address %q: %v", r.kube.Config.Host, err)
	}
	if r.kubeProxy, err = stack.NewOutageProxy(apiServer.Host); err != nil {
		return stop, err
	}
	stops = append(stops, r.kubeProxy.Down)
	r.kubeconfig = filepath.Join(r.cfg.Dir, "housekeeper.kubeconfig")
	if err := writeKubeconfig(r.kubeconfig, r.kube.Kubeconfig, "https://"+r.kubeProxy.Addr()); err != nil {
		return stop, err
	}
	if err := checkKubeconfig(r.kubeconfig); err != nil {
		return stop, fmt.Errorf("housekeeper's kubeconfig, through the proxy: %w", err)
	}
	for _, start := range []func(string) error{r.startNATS, r.startAzurite} {
		if err := start(bin); err != nil {
			return stop, err
		}
	}
	for _, n := range r.nats {
		stops = append(stops, n.close)
	}
	stops = append(stops, r.azurite.close)

	if r.client, err = kube.NewClient(r.kube.Config); err != nil {
		return stop, err
	}
	if r.nc, err = nats.Connect(r.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond)); err != nil {
		return stop, err
	}
	stops = append(stops, r.nc.Close)
	// As housekeeper publishes: each attempt bounded, waiting out elections.
	if r.js, err = natsconn.NewJetStream(r.nc, zap.NewNop()); err != nil {
		return stop, err
	}
	if err := r.waitForJetStream(time.Minute); err != nil {
		return stop, err
	}
	hk := stack.Housekeeper{Bin: bin, Env: []string{"HOUSEKEEPER_NATS_URL=" + r.natsURL, "HOUSEKEEPER_LOG_FORMAT=json",
		"HOUSEKEEPER_CLUSTER=" + Cluster, "HOUSEKEEPER_TYPES=azure,local", "HOUSEKEEPER_KUBECONFIG=" + r.kubeconfig}}
	// The setup first: the streams and the consumers, which the processes only bind to.
	if err := hk.Setup(context.Background(), io.Discard, "--max-deliver", "200", "--stream-replicas", strconv.Itoa(len(r.nats))); err != nil {
		return stop, err
	}
	// The bridge's production resync period: a lost event is not repaired by a relist within
	// the run, only by what housekeeper does on purpose (a restart's relist). Leader election
	// as in production: an outage of the API server costs the bridge its Lease, which it must
	// stand by for and win again without exiting.
	r.bridge, err = newProcess(r.cfg.Dir, "bridge", hk.Bridge("--addr", "127.0.0.1:0",
		"--leader-elect", "--leader-election-namespace", leaseNamespace, "--leader-election-name", leaseName,
		"--leader-election-identity", leaseIdentity), hk.Environ())
	if err != nil {
		return stop, err
	}
	for _, fn := range functionNames {
		for i := range r.cfg.Replicas {
			p, err := newProcess(r.cfg.Dir, fn+"-"+strconv.Itoa(i), hk.Function(fn, "--local-root", r.localRoot, "--addr", "127.0.0.1:0",
				"--backoff-base", "200ms", "--backoff-max", "5s", "--concurrency", "8"), hk.Environ())
			if err != nil {
				return stop, err
			}
			r.workers = append(r.workers, p)
		}
	}
	for _, p := range r.housekeeper() {
		if err := p.start(); err != nil {
			return stop, err
		}
		stops = append(stops, p.close)
	}
	return stop, nil
}

// writeKubeconfig writes kubeconfig with every cluster's server set to server.
func writeKubeconfig(path string, kubeconfig []byte, server string) error {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// checkKubeconfig asks the API server at kubeconfig for its version.
func checkKubeconfig(path string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().ServerVersion()
	return err
}

// startNATS runs the stack's nats-server processes (one, or a cluster of three), each under
// the suite's process control: a SIGKILL and a restart keep clients' URLs valid.
func (r *rig) startNATS(string) error {
	nodes, err := stack.NATSClusterLayout(r.cfg.Dir, max(r.cfg.NATSNodes, 1), "")
	if err != nil {
		return err
	}
	var urls []string
	for _, n := range nodes {
		processName := "nats-server"
		if len(nodes) > 1 {
			processName = n.Name // the server name: what stream and consumer infos call their leader
		}
		p, err := newProcess(r.cfg.Dir, processName, n.Args, nil)
		if err != nil {
			return err
		}
		p.ready = n.Ready
		if err := p.start(); err != nil {
			return err
		}
		r.nats = append(r.nats, p)
		r.natsMon = append(r.natsMon, n.MonitorURL)
		urls = append(urls, n.ClientURL)
	}
	r.natsURL = strings.Join(urls, ",")
	return nil
}

// waitForJetStream waits until JetStream answers (a cluster has elected its meta leader).
func (r *rig) waitForJetStream(limit time.Duration) error {
	return stack.Poll(limit, 200*time.Millisecond, "JetStream to answer", func() (bool, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := r.js.AccountInfo(ctx)
		return err == nil, fmt.Sprint(err), nil
	})
}

// startAzurite runs Azurite as a process storing on disk, so a restart keeps the blobs.
func (r *rig) startAzurite(string) error {
	azurite, err := stack.AzuriteBinary()
	if err != nil {
		return err
	}
	port, err := stack.FreePort()
	if err != nil {
		return fmt.Errorf("no free port for Azurite: %w", err)
	}
	store := filepath.Join(r.cfg.Dir, "azurite")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return err
	}
	if r.azurite, err = newProcess(r.cfg.Dir, "azurite", []string{azurite,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port), "--location", store,
		"--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry"}, nil); err != nil {
		return err
	}
	r.azurite.dir = store
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	r.azurite.ready = func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}
	r.azuriteEndpoint = fmt.Sprintf("http://%s/%s", addr, stack.AzuriteAccount)
	return r.azurite.start()
}

// housekeeper returns the processes of housekeeper itself: the bridge and every worker.
func (r *rig) housekeeper() []*process { return append([]*process{r.bridge}, r.workers...) }

// processes returns every process the suite runs.
func (r *rig) processes() []*process {
	return append(append(slices.Clone(r.nats), r.azurite), r.housekeeper()...)
}

// heal restarts whatever a fault or a crash left stopped.
func (r *rig) heal() {
	for _, p := range r.processes() {
		if p.exited() {
			if err := p.start(); err != nil {
				fmt.Fprintf(r.cfg.Out, "restarting %s: %v\n", p.name, err)
			}
		}
	}
}

// newRand is a random source drawn from the run's seed; stream tells the users apart.
func newRand(cfg Config, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, stream)) }
