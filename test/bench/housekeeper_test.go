package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
)

// hkOptions is how housekeeper runs in a phase.
type hkOptions struct {
	qps           float64 // negative: no client limit
	burst         int
	entryReplicas int
	// natsNodes > 0 runs nats-server as that many processes, the streams replicated on each
	// (1: R1 synced on every write, 3: a cluster, R3), instead of embedded.
	natsNodes int
	// chartSync leaves the nats-servers' sync interval at its default, as the chart's NATS
	// (infra/nats) runs, instead of syncing every write.
	chartSync bool
	// profile has every housekeeper process write a CPU profile to the log directory.
	profile bool
	// secure runs NATS as the chart's does (infra/nats): TLS, and each process connected as its
	// own identity with the permissions `housekeeper nats-auth` issues, which nats-server checks
	// on every publish and subscription.
	secure bool
	// floor, the binary of test/bench/informerfloor, runs client-go's informers on the bridge's
	// watches beside it: the floor its cost is compared with ("": none).
	floor string
}

// floorName is the informer floor's process in the tables, counted in no side's totals.
const floorName = "client-go informers (floor, not counted)"

func (o hkOptions) limitArgs() []string {
	if o.qps < 0 {
		return []string{"--kube-qps", "-1"}
	}
	return []string{"--kube-qps", strconv.FormatFloat(o.qps, 'f', -1, 64), "--kube-burst", strconv.Itoa(o.burst)}
}

// housekeeper runs a fresh nats-server (embedded, or processes) and the bridge and functions
// as processes, as the conformance suite does.
type housekeeper struct {
	stopNATS func()
	nats     *stack.NATSCluster // nil: embedded in this process
	natsProf string             // nats-server's pprof address (one node), "" for none
	issued   *natsconn.Issued   // the NATS identities of a secure NATS, nil for an open one
	procs    []*stack.Served
	floor    *stack.Served // nil without hkOptions.floor
}

func startHousekeeper(b *testing.B, e *env, phase string, o hkOptions) (*housekeeper, error) {
	h := &housekeeper{}
	var natsURL string
	if o.natsNodes == 0 {
		nats, err := stack.StartNATS(filepath.Join(e.logDir, phase+"-jetstream"), stack.NATSLogger(e.zap(b, phase+"-nats-server.log")))
		if err != nil {
			return nil, fmt.Errorf("nats-server: %w", err)
		}
		natsURL, h.stopNATS = nats.URL, nats.Stop
	} else {
		dir := filepath.Join(e.logDir, phase+"-nats")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var opts []stack.NATSOption
		if o.chartSync {
			opts = append(opts, stack.NATSDefaultSync())
		}
		logs := func(name string) io.Writer { return e.file(b, phase+"-nats-"+name+".log") }
		var c *stack.NATSCluster
		var err error
		switch {
		case o.secure && o.profile:
			return nil, errors.New("a secure NATS includes its identities' configuration: it serves no profile")
		case o.secure:
			c, h.issued, err = natsauth.StartCluster(dir, o.natsNodes, natsconn.FormConfig, cli.Permissions(), false, logs, opts...)
		case o.profile:
			// nats-server has no profile flag: it serves pprof on prof_port, fetched per burst.
			var include string
			if include, h.natsProf, err = natsProfiling(dir); err != nil {
				return nil, err
			}
			c, err = stack.StartNATSCluster(dir, o.natsNodes, include, logs, opts...)
		default:
			c, err = stack.StartNATSCluster(dir, o.natsNodes, "", logs, opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("nats-server: %w", err)
		}
		natsURL, h.stopNATS, h.nats = c.URL, c.Stop, c
	}
	hk := stack.Housekeeper{Bin: e.binDir, Env: []string{
		"HOUSEKEEPER_NATS_URL=" + natsURL,
		"HOUSEKEEPER_KUBECONFIG=" + e.kubecfg,
		"HOUSEKEEPER_CLUSTER=bench-" + phase,
		"HOUSEKEEPER_TYPES=local",
	}}
	// identity is the NATS flags of a process connecting as identity: none to an open server.
	identity := func(identity string) []string {
		if h.issued == nil {
			return nil
		}
		return h.issued.Args(natsURL, identity)
	}
	// flags are the flags every process of the phase has, connecting as identity id.
	flags := func(name, id string) []string {
		f := append(o.limitArgs(), identity(id)...)
		if o.profile {
			f = append(f, "--cpu-profile", filepath.Join(e.logDir, phase+"-"+name+".pprof"))
		}
		return f
	}
	procs := []stack.Proc{{Name: "bridge", Argv: append(hk.Bridge("--leader-elect=false"), flags("bridge", events.IdentityBridge)...)}}
	fns := []string{"bucket", "purge"}
	for range o.entryReplicas {
		fns = append(fns, "entry")
	}
	for i, fn := range fns {
		name := fn
		if fn == "entry" && o.entryReplicas > 1 {
			name = fmt.Sprintf("entry-%d", i-1)
		}
		argv := hk.Function(fn, "--local-root", e.root)
		if fn != "bucket" { // the retention flags are the entry's and the purge's
			argv = append(argv, "--retention", "0s")
		}
		procs = append(procs, stack.Proc{Name: name, Argv: append(argv, flags(name, fn)...)})
	}
	setup := append([]string{"--stream-replicas", strconv.Itoa(max(o.natsNodes, 1))}, identity(events.IdentitySetup)...)
	logs := func(name string) io.Writer { return e.file(b, phase+"-"+name+".log") }
	start := func() (err error) {
		if h.procs, err = hk.StartAll(context.Background(), logs, setup, procs...); err != nil || o.floor == "" {
			return err
		}
		cmd := exec.Command(o.floor, "--kubeconfig", e.kubecfg, "--secret-namespace", gardenNamespace)
		log := logs("floor")
		cmd.Stdout, cmd.Stderr = log, log
		if h.floor, err = stack.StartServed(floorName, cmd); err != nil {
			return err
		}
		return h.floor.AwaitReady(time.Minute)
	}
	if err := start(); err != nil {
		_ = h.stop()
		return nil, err
	}
	return h, nil
}

// exec starts cmd as the process name, serving /metrics and /readyz on a free --addr, and
// says when it was exec'd.
func (e *env) exec(name string, cmd *exec.Cmd) (*stack.Served, time.Time, error) {
	at := time.Now()
	p, err := stack.StartServed(name, cmd)
	return p, at, err
}

func (h *housekeeper) requests() (counts, error) {
	byVerb, _, err := h.scrape()
	return byVerb, err
}

// detail is the requests by process, then "verb resource".
func (h *housekeeper) detail() counts {
	_, byResource, err := h.scrape()
	if err != nil {
		return nil
	}
	return byResource
}

// scrape reads every process's request counter.
func (h *housekeeper) scrape() (byVerb, byResource counts, err error) {
	byVerb, byResource = counts{}, counts{}
	for _, p := range h.procs {
		select {
		case <-p.Done():
			return nil, nil, fmt.Errorf("%s exited: %v", p.Name, p.State())
		default:
		}
		v, r, err := scrapeRequests(p.Addr)
		if err != nil {
			return nil, nil, err
		}
		byVerb[p.Name], byResource[p.Name] = v, r
	}
	return byVerb, byResource, nil
}

// natsProfiling writes the include file that has nats-server serve pprof on a free port.
func natsProfiling(dir string) (include, addr string, err error) {
	port, err := stack.FreePort()
	if err != nil {
		return "", "", err
	}
	// nats-server resolves an include relative to the including file, beside it in dir.
	if err := os.WriteFile(filepath.Join(dir, "profiling.conf"), []byte(fmt.Sprintf("prof_port: %d\n", port)), 0o644); err != nil {
		return "", "", err
	}
	return "profiling.conf", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// processes are housekeeper's processes and nats-server's, when they are processes.
func (h *housekeeper) processes() []osProc {
	var ps []osProc
	for _, p := range h.procs {
		o := osProc{name: p.Name, pid: p.Pid(), metrics: p.Addr}
		if p.Name == "bridge" {
			o.counter = "housekeeper_bridge_events_published_total"
		}
		ps = append(ps, o)
	}
	if h.floor != nil {
		ps = append(ps, osProc{name: h.floor.Name, pid: h.floor.Pid(), metrics: h.floor.Addr, counter: "informer_events_received_total", floor: true})
	}
	if h.nats != nil {
		for i, n := range h.nats.Nodes {
			name := "nats-server"
			if len(h.nats.Nodes) > 1 {
				name = fmt.Sprintf("nats-server-%d", i)
			}
			ps = append(ps, osProc{name: name, pid: n.Pid(), pprof: h.natsProf})
		}
	}
	return ps
}

// stop ends every process and nats-server.
func (h *housekeeper) stop() error {
	procs := h.procs
	if h.floor != nil {
		procs = append(slices.Clone(procs), h.floor)
	}
	err := stack.StopAll(procs)
	h.stopNATS()
	return err
}
