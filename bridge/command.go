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

	"golang.org/x/sync/errgroup"

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
	fs.DurationVar(&c.Bridge.StateInterval, "state-interval", DefaultStateInterval, "while leading, read the dead letters and pending purges NATS holds this often, for the metrics")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&c.LeaderElection.Namespace, "leader-election-namespace", "garden", "namespace of the Lease")
	fs.StringVar(&c.LeaderElection.Name, "leader-election-name", "housekeeper-bridge", "name of the Lease")
	hostname, _ := os.Hostname()
	fs.StringVar(&c.LeaderElection.Identity, "leader-election-identity", hostname, "identity in the Lease (default: hostname, the pod name)")
	return fs
}

// Run runs the bridge until ctx is done.
func (c *Command) Run(ctx context.Context) error {
	proc, err := process.Start(ctx, process.Spec{Name: "housekeeper-bridge", Flags: c.Flags, Kube: &c.Kube,
		NATS: &c.NATS, Identity: events.IdentityBridge})
	if err != nil {
		return err
	}
	defer proc.Close()
	log, cfg, reg, nc, js := proc.Log, proc.KubeConfig, proc.Metrics, proc.NC, proc.JetStream
	c.Bridge.Logger = log

	b, err := New(cfg, js, reg, c.Bridge)
	if err != nil {
		return err
	}
	var leading atomic.Bool
	srv := &health.Server{Addr: c.Flags.Addr, Registry: reg, Ready: func() error {
		switch {
		case proc.NATSReady() != nil:
			return proc.NATSReady()
		case leading.Load() && !b.Synced():
			return errors.New("informers not synced")
		}
		return nil
	}}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error {
		run := func(ctx context.Context) error {
			leading.Store(true)
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
		if !c.LeaderElect {
			return run(ctx)
		}
		return RunAsLeader(ctx, cfg, c.LeaderElection, log, run)
	})
	return g.Wait()
}
