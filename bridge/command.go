package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/health"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/process"
)

// Command is the bridge binary's configuration.
type Command struct {
	Kube           kube.Options
	NATS           natsconn.Options
	Flags          process.Flags
	Bridge         Options
	LeaderElect    bool
	LeaderElection LeaderElection
}

// ParseCommand reads flags and HOUSEKEEPER_* environment variables. On --help it returns
// flag.ErrHelp: print Usage.
func ParseCommand(args []string) (*Command, error) {
	c := &Command{}
	fs := c.flags()
	if err := config.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("housekeeper-bridge takes no arguments, got %q", fs.Args())
	}
	if err := c.Kube.Validate(); err != nil {
		return nil, err
	}
	if err := config.ValidateCluster(c.Bridge.Cluster); err != nil {
		return nil, err
	}
	if err := c.Bridge.Scope.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Usage is the bridge's help: what it does and its flags.
func Usage() string {
	var b strings.Builder
	b.WriteString("usage: housekeeper-bridge [flags]\n\nPublish every change of the BackupBuckets and BackupEntries it serves (--types, --extension-classes), their\nsecrets and namespaces, and of EtcdBackupConfigs, as CloudEvents on NATS JetStream.\n\nflags:\n")
	fs := (&Command{}).flags()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	b.WriteString("\nEvery flag can also be set as HOUSEKEEPER_<FLAG> in the environment.\n")
	return b.String()
}

// flags binds the command's flags to c.
func (c *Command) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("housekeeper-bridge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.Kube.BindFlags(fs, os.Getenv("KUBECONFIG"))
	c.NATS.BindFlags(fs)
	c.Flags.BindFlags(fs, "address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.Bridge.Cluster, "cluster", "", "cluster name, the source of every event (required)")
	c.Bridge.Scope.BindFlags(fs)
	fs.DurationVar(&c.Bridge.ResyncPeriod, "resync-period", 30*time.Minute, "re-announce every object this often (0: only at start)")
	fs.IntVar(&c.Bridge.MaxInFlight, "max-in-flight", DefaultMaxInFlight, "published events awaiting their JetStream ack at once")
	fs.DurationVar(&c.Bridge.StateInterval, "state-interval", DefaultStateInterval, "while leading, read the dead letters and pending purges NATS holds this often, for the metrics, and re-drive transient dead letters")
	fs.DurationVar(&c.Bridge.RedriveAfter, "redrive-after", DefaultRedriveAfter, "re-drive a transient dead letter (its retry budget spent) once it is this old and the API server and NATS answer")
	fs.BoolVar(&c.Bridge.RecordDeletions, "record-deletions", false, "publish a deleted event when an object leaves the API server (a record only: no function consumes it)")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&c.LeaderElection.Namespace, "leader-election-namespace", "garden", "namespace of the Lease")
	fs.StringVar(&c.LeaderElection.Name, "leader-election-name", "housekeeper-bridge", "name of the Lease")
	hostname, _ := os.Hostname()
	fs.StringVar(&c.LeaderElection.Identity, "leader-election-identity", hostname, "identity in the Lease (default: hostname, the pod name)")
	return fs
}

// Run runs the bridge until ctx is done. A replica that loses its lease (the API server away
// longer than the renew deadline) stands by for it again in the same process, not ready
// meanwhile, and leads again with new informers: no exit, no crash-loop back-off delaying the
// recovery. Each term's bridge is new, as after a restart.
func (c *Command) Run(ctx context.Context) error {
	proc, err := process.Start(ctx, c.spec())
	if err != nil {
		return err
	}
	defer proc.Close()
	return c.serve(ctx, proc)
}

func (c *Command) spec() process.Spec {
	return process.Spec{Name: "housekeeper-bridge", Flags: c.Flags, Kube: &c.Kube, NATS: &c.NATS, Identity: events.IdentityBridge}
}

// serve runs the bridge in proc until ctx is done.
func (c *Command) serve(ctx context.Context, proc *process.Process) error {
	log, cfg, reg, nc, js := proc.Log, proc.KubeConfig, proc.Metrics, proc.NC, proc.JetStream
	c.Bridge.Logger = log

	var leading atomic.Pointer[Bridge] // the term's bridge while this replica leads
	// The Lease's requests, every RetryPeriod whether leading or standing by, say whether the
	// API server answers: a replica it does not answer is not ready, leading or not.
	leaseCfg, leaseAnswer := rest.CopyConfig(cfg), &apiAnswer{}
	kube.OnResponse(leaseCfg, leaseAnswer.observe)
	srv := &health.Server{Addr: c.Flags.Addr, Registry: reg, Ready: func() error {
		if err := proc.NATSReady(); err != nil {
			return err
		}
		if c.LeaderElect {
			if err := leaseAnswer.err(); err != nil {
				return err
			}
		}
		if b := leading.Load(); b != nil && !b.Synced() {
			return errors.New("informers not synced")
		}
		return nil
	}}
	// term runs one term as leader with a bridge of its own, whose metrics are withdrawn with it.
	term := func(ctx context.Context) error {
		b, metrics := c.newBridge(ctx, cfg, js, reg, log)
		if b == nil {
			return nil // ctx ended
		}
		defer metrics.unregister()
		leading.Store(b)
		defer leading.Store(nil)
		// The streams are `housekeeper setup`'s: the bridge publishes only once they exist.
		if err := natsconn.RequireStreams(ctx, js, log); err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return b.Run(ctx) })
		g.Go(func() error { return b.ServeResync(ctx, nc) })
		g.Go(func() error { return b.RunState(ctx, js) })
		return g.Wait()
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error {
		if !c.LeaderElect {
			return term(ctx)
		}
		for {
			err := RunAsLeader(ctx, leaseCfg, c.LeaderElection, log, term)
			if !errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
				return err
			}
			log.Warn("lost the lease: standing by to lead again", zap.Error(err))
		}
	})
	return g.Wait()
}

// newBridge builds a term's bridge, trying again while the API server does not answer the
// lookups New makes (which of housekeeper's kinds it serves): a term can start just as it goes
// away. It returns nil once ctx ends.
func (c *Command) newBridge(ctx context.Context, cfg *rest.Config, js jetstream.JetStream, reg prometheus.Registerer, log *zap.Logger) (*Bridge, *termRegistry) {
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		metrics := &termRegistry{reg: reg}
		b, err := New(cfg, js, metrics, c.Bridge)
		if err == nil {
			return b, metrics
		}
		metrics.unregister()
		log.Warn("cannot start watching; trying again", zap.Duration("in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(delay):
		}
	}
}

// apiAnswer remembers whether the API server answered the last request observed: an error or a
// 5xx (unavailable, a timeout) is no answer.
type apiAnswer struct {
	last atomic.Pointer[error]
}

func (a *apiAnswer) observe(status int, err error) {
	if err == nil && status >= 500 {
		err = fmt.Errorf("the API server answers %d", status)
	}
	if err != nil {
		err = fmt.Errorf("the API server does not answer the Lease's requests: %w", err)
	}
	a.last.Store(&err)
}

// err is why the API server did not answer the last request, nil if it did or none was sent.
func (a *apiAnswer) err() error {
	if p := a.last.Load(); p != nil {
		return *p
	}
	return nil
}

// termRegistry registers a term's metrics on the process's registry and takes them off again
// when the term ends, so the next term registers its own.
type termRegistry struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

func (t *termRegistry) Register(c prometheus.Collector) error {
	if err := t.reg.Register(c); err != nil {
		return err
	}
	t.collectors = append(t.collectors, c)
	return nil
}

func (t *termRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *termRegistry) Unregister(c prometheus.Collector) bool { return t.reg.Unregister(c) }

func (t *termRegistry) unregister() {
	for _, c := range t.collectors {
		t.reg.Unregister(c)
	}
}
