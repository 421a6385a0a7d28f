package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// BenchmarkCost measures what a change costs each side: a create burst and a delete burst of
// 5,000 BackupEntries, upstream provider-local's controllers as their own process
// (test/bench/upstream, no client limit) beside housekeeper's processes with nats-server as its
// own process (R1, every write synced, every process profiled), and again as the chart deploys
// housekeeper: the entry function at its KEDA maximum of four replicas, the processes' default
// client limits, and NATS as infra/nats runs it (three nats-servers, R3, syncing at their
// default, TLS, each process connected as its own identity). The bursts are driven and observed
// from this process (counted for neither). It prints each process's CPU seconds and peak RSS per
// burst, CPU per entry and the ratio, and keeps a CPU profile of every process of the first two
// rows in the log directory. Beside each housekeeper row runs the bridge's floor, client-go's
// own informers on the bridge's watches doing nothing with the events (test/bench/
// informerfloor), counted in no total: the bridge's CPU is printed against it.
func BenchmarkCost(b *testing.B) {
	n := burstEntries(b, 5000)
	e := startEnv(b)
	upstreamBin, floorBin := buildUpstream(b, e), buildCommand(b, e, "informerfloor")
	rows := []row{
		{id: "c1", label: "upstream provider-local, its own process, no client limit", start: func(b *testing.B, e *env, phase string) (side, error) {
			return startUpstreamProcess(b, e, phase, upstreamBin)
		}},
		housekeeperRow("c2", "housekeeper, 1 replica each, --kube-qps -1, nats-server process (R1)", hkOptions{qps: -1, entryReplicas: 1, natsNodes: 1, profile: true, floor: floorBin}),
		// As the chart deploys it: KEDA scales the entry function to a lag over its
		// lagThreshold of 20 per replica, so a 5,000-entry burst runs maxReplicas, 4
		// (infra/chart/values.yaml).
		housekeeperRow("c3", "housekeeper as the chart deploys it: entry at KEDA's 4 replicas, default client limits, 3 nats-servers (R3, default sync, TLS, identities)",
			hkOptions{qps: kube.DefaultQPS, burst: kube.DefaultBurst, entryReplicas: 4, natsNodes: 3, chartSync: true, secure: true, floor: floorBin}),
	}
	var results []*result
	for _, r := range rows {
		res := &result{row: r, n: n}
		ok := b.Run(r.id+"-"+benchName(r.label), func(b *testing.B) { runPhase(b, e, res) })
		results = append(results, res)
		if !ok && !res.cleaned {
			break
		}
	}
	printTable(os.Stdout, fmt.Sprintf("Burst of %d BackupEntries, each side its own processes", n), results)
	printCost(os.Stdout, results, e.logDir)
}

// buildUpstream builds test/bench/upstream, upstream's controllers as a process, into the
// binary directory.
func buildUpstream(b *testing.B, e *env) string { return buildCommand(b, e, "upstream") }

// buildCommand builds the command test/bench/<name> into the binary directory.
func buildCommand(b *testing.B, e *env, name string) string {
	bin := filepath.Join(e.binDir, name)
	logf("building test/bench/%s", name)
	build := exec.Command("go", "build", "-o", bin, "./test/bench/"+name)
	root, err := stack.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building test/bench/%s: %v\n%s", name, err, out)
	}
	return bin
}

// osProc is a process whose CPU and memory a phase measures.
type osProc struct {
	name string
	pid  int
	// metrics is its /metrics address, "" for none, and counter the counter of events there
	// (published, received) counted per burst, "" for none.
	metrics, counter string
	// floor is a reference measured beside a side and counted in none of its totals.
	floor bool
	// pprof is the address of its /debug/pprof, for a process that cannot write its own
	// profile (nats-server); "" for none.
	pprof string
}

// upstreamProcess is upstream's controllers as a process: a side with one process.
type upstreamProcess struct{ p *stack.Served }

func startUpstreamProcess(b *testing.B, e *env, phase, bin string) (*upstreamProcess, error) {
	cmd := exec.Command(bin, "--kubeconfig", e.kubecfg, "--root", e.root,
		"--leader-elect=false", "--cpu-profile", filepath.Join(e.logDir, phase+"-provider-local.pprof"))
	log := e.file(b, phase+"-provider-local.log")
	cmd.Stdout, cmd.Stderr = log, log
	p, _, err := e.exec("provider-local", cmd)
	if err != nil {
		return nil, err
	}
	u := &upstreamProcess{p: p}
	if err := p.AwaitReady(time.Minute); err != nil {
		_ = u.stop()
		return nil, err
	}
	return u, nil
}

func (u *upstreamProcess) requests() (counts, error) {
	v, _, err := scrapeRequests(u.p.Addr)
	return counts{"provider-local": v}, err
}

func (u *upstreamProcess) detail() counts {
	_, r, err := scrapeRequests(u.p.Addr)
	if err != nil {
		return nil
	}
	return counts{"provider-local": r}
}

func (u *upstreamProcess) processes() []osProc {
	return []osProc{{name: "provider-local", pid: u.p.Pid(), metrics: u.p.Addr}}
}

func (u *upstreamProcess) stop() error { return stack.StopAll([]*stack.Served{u.p}) }

// cost is what one process spent in a burst.
type cost struct {
	cpu       time.Duration
	rss, peak uint64  // bytes: the RSS at the burst's start, the highest during it
	events    float64 // the process's counter of events (osProc.counter) over the burst
	floor     bool
}

// costs are a phase's processes' costs in each burst, in the order of the side's processes.
type costs struct {
	names          []string
	create, delete map[string]cost
}

// usageMeter samples a side's processes: CPU at the start and end of a burst, the peak RSS
// from the start (each burst resets the kernel's high-water mark).
type usageMeter struct {
	procs  []osProc
	start  map[string]usage
	events map[string]float64
	// profiles is where profiles fetched from the processes' pprof go, named by prefix.
	profiles, prefix string
	profiling        *profiling
}

func newUsageMeter(s side, profiles, prefix string) *usageMeter {
	m := &usageMeter{profiles: profiles, prefix: prefix}
	if ps, ok := s.(interface{ processes() []osProc }); ok {
		m.procs = ps.processes()
	}
	return m
}

// begin starts the burst called burst: CPU now, every process's peak RSS reset to its RSS
// now, and the profiles of those served by pprof fetched until end.
func (m *usageMeter) begin(burst string) error {
	m.start, m.events = map[string]usage{}, map[string]float64{}
	m.profiling = newProfiling()
	for _, p := range m.procs {
		if p.pprof != "" {
			m.profiling.fetch(p.pprof, filepath.Join(m.profiles, fmt.Sprintf("%s-%s-%s", m.prefix, p.name, burst)))
		}
		// clear_refs 5 resets VmHWM (Linux ≥ 4.0), so the peak is this burst's.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0); err != nil {
			return fmt.Errorf("%s: resetting its peak RSS: %w", p.name, err)
		}
		u, err := usageOf(p.pid)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		m.start[p.name] = u
		if p.counter != "" {
			if m.events[p.name], err = scrapeCounter(p.metrics, p.counter); err != nil {
				return err
			}
		}
	}
	return nil
}

// end is what each process spent since begin.
func (m *usageMeter) end() (map[string]cost, error) {
	m.profiling.stop()
	out := map[string]cost{}
	for _, p := range m.procs {
		u, err := usageOf(p.pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		c := cost{cpu: u.cpu - m.start[p.name].cpu, rss: m.start[p.name].rss, peak: u.peak, floor: p.floor}
		if p.counter != "" {
			n, err := scrapeCounter(p.metrics, p.counter)
			if err != nil {
				return nil, err
			}
			c.events = n - m.events[p.name]
		}
		out[p.name] = c
	}
	return out, nil
}

func (m *usageMeter) names() []string {
	names := make([]string, len(m.procs))
	for i, p := range m.procs {
		names[i] = p.name
	}
	return names
}

// profiling fetches CPU profiles from pprof endpoints back to back until it ends.
type profiling struct {
	ctx     context.Context
	end     context.CancelFunc
	running sync.WaitGroup
}

func newProfiling() *profiling {
	p := &profiling{}
	p.ctx, p.end = context.WithCancel(context.Background())
	return p
}

// fetch writes addr's profiles, 5 s each, to prefix-1.pprof, prefix-2.pprof, … (go tool pprof
// merges them); the piece running at the end is dropped, so a burst shorter than 5 s has none.
func (p *profiling) fetch(addr, prefix string) {
	p.running.Go(func() {
		for i := 1; p.ctx.Err() == nil; i++ {
			if err := fetchProfile(p.ctx, "http://"+addr+"/debug/pprof/profile?seconds=5", fmt.Sprintf("%s-%d.pprof", prefix, i)); err != nil && p.ctx.Err() == nil {
				logf("profile of %s: %v", addr, err)
				return
			}
		}
	})
}

// stop ends the fetches and waits for them.
func (p *profiling) stop() {
	p.end()
	p.running.Wait()
}

func fetchProfile(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		_ = os.Remove(file) // cut short: not a profile
		return err
	}
	return f.Close()
}

// scrapeCounter is the sum of a counter's series on a process's /metrics (0 if it has none).
func scrapeCounter(addr, name string) (float64, error) {
	var sum float64
	err := metricLines(addr, func(line string) error {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			return nil
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return fmt.Errorf("%s/metrics: cannot parse %q", addr, line)
		}
		sum += v
		return nil
	})
	return sum, err
}

// printCost writes each side's CPU and peak memory per process and burst, per entry, and
// housekeeper's against upstream's.
func printCost(w io.Writer, results []*result, logDir string) {
	var up *result
	var measured, hks []*result
	for _, r := range results {
		if r.failure != "" || r.costs == nil {
			continue
		}
		measured = append(measured, r)
		if r.row.housekeeper {
			hks = append(hks, r)
		} else {
			up = r
		}
	}
	fmt.Fprintf(w, "\n### CPU and memory per burst, by process\n\n")
	fmt.Fprintln(w, "| side | process | create: CPU s | create: RSS MiB, start → peak | delete: CPU s | delete: RSS MiB, start → peak |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	total := func(burst map[string]cost) time.Duration {
		var t time.Duration
		for _, c := range burst {
			if !c.floor {
				t += c.cpu
			}
		}
		return t
	}
	mib := func(c cost) string {
		return fmt.Sprintf("%.0f → %.0f", float64(c.rss)/(1<<20), float64(c.peak)/(1<<20))
	}
	for _, r := range measured {
		for _, name := range r.costs.names {
			c, d := r.costs.create[name], r.costs.delete[name]
			fmt.Fprintf(w, "| %s | %s | %.2f | %s | %.2f | %s |\n", r.row.label, name, c.cpu.Seconds(), mib(c), d.cpu.Seconds(), mib(d))
		}
		ct, dt := total(r.costs.create), total(r.costs.delete)
		fmt.Fprintf(w, "| %s | **all, per entry** | **%.2f ms** | | **%.2f ms** | |\n", r.row.label,
			float64(ct.Microseconds())/1000/float64(r.n), float64(dt.Microseconds())/1000/float64(r.n))
	}
	fmt.Fprintln(w)
	// withoutNATS leaves nats-server's processes out: what housekeeper's own processes spend.
	withoutNATS := func(burst map[string]cost) map[string]cost {
		out := map[string]cost{}
		for name, c := range burst {
			if !strings.HasPrefix(name, "nats-server") {
				out[name] = c
			}
		}
		return out
	}
	perEntry := func(burst map[string]cost, n int) float64 { return total(burst).Seconds() / float64(n) }
	for _, hk := range hks {
		if up == nil {
			break
		}
		upCreate, upDelete := perEntry(up.costs.create, up.n), perEntry(up.costs.delete, up.n)
		fmt.Fprintf(w, "%s / upstream, CPU per entry (goal ≤ 1): create %.2f, delete %.2f (without nats-server: %.2f, %.2f); throughput %.2f, p99 %.2f (goals ≥ 1, ≤ 1).\n", hk.row.id,
			perEntry(hk.costs.create, hk.n)/upCreate, perEntry(hk.costs.delete, hk.n)/upDelete,
			perEntry(withoutNATS(hk.costs.create), hk.n)/upCreate, perEntry(withoutNATS(hk.costs.delete), hk.n)/upDelete,
			hk.entriesPerSec/up.entriesPerSec, hk.p99.Seconds()/up.p99.Seconds())
	}
	for _, hk := range hks {
		for _, burst := range []struct {
			what string
			c    map[string]cost
		}{{"create", hk.costs.create}, {"delete", hk.costs.delete}} {
			c := burst.c["bridge"]
			if c.events == 0 {
				continue
			}
			perEvent := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / 1000 / c.events }
			fmt.Fprintf(w, "%s, the bridge, %s burst: %.3f ms of CPU per event published (%.0f events; goal ≤ 0.3)", hk.row.id, burst.what, perEvent(c.cpu), c.events)
			if f, ok := burst.c[floorName]; ok && f.cpu > 0 {
				fmt.Fprintf(w, "; client-go's informers on the same watches (the floor): %.3f ms per event the bridge published (%.0f received), the bridge at %.2f× the floor (goal ≤ 1.25)",
					perEvent(f.cpu), f.events, c.cpu.Seconds()/f.cpu.Seconds())
			}
			fmt.Fprintln(w, ".")
		}
	}
	profiles, _ := filepath.Glob(filepath.Join(logDir, "*.pprof"))
	// nats-server's pieces, one line per burst.
	pieces := regexp.MustCompile(`-\d+\.pprof$`)
	for i, p := range profiles {
		profiles[i] = pieces.ReplaceAllString(p, "-*.pprof")
	}
	sort.Strings(profiles)
	profiles = slices.Compact(profiles)
	fmt.Fprintf(w, "\nCPU is user + system time from /proc/<pid>/stat over the burst (from its first create or delete call until no request for %s); peak RSS is VmHWM, reset at the burst's start. The driver and the observer run in the benchmark's process and count for neither side. CPU profiles: of each process's whole life, written by the process (--cpu-profile), and nats-server's per burst in 5 s pieces from its prof_port (go tool pprof -top <binary> <profiles…>):\n\n", settleQuiet)
	for _, p := range profiles {
		fmt.Fprintf(w, "- %s\n", p)
	}
}
