package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
	types, classes config.List
	LeaderElect    bool
	LeaderElection LeaderElection
}

// ParseCommand reads flags and HOUSEKEEPER_* environment variables.
func ParseCommand(args []string) (*Command, error) {
	c := &Command{}
	fs := flag.NewFlagSet("housekeeper-bridge", flag.ContinueOnError)
	c.Kube.BindFlags(fs, os.Getenv("KUBECONFIG"))
	c.NATS.BindFlags(fs)
	c.Flags.BindFlags(fs, "address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.Bridge.Cluster, "cluster", "", "cluster name, the source of every event (required)")
	fs.Var(&c.types, "types", "provider types to handle (spec.type), comma-separated; empty: all")
	fs.Var(&c.classes, "classes", "extension classes to handle, comma-separated (default shoot; unset class means shoot)")
	fs.DurationVar(&c.Bridge.ResyncPeriod, "resync-period", 30*time.Minute, "re-announce every object this often (0: only at start)")
	fs.IntVar(&c.Bridge.MaxInFlight, "max-in-flight", DefaultMaxInFlight, "published events awaiting their JetStream ack at once")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run only while holding a Lease, so several replicas can run")
	fs.StringVar(&c.LeaderElection.Namespace, "leader-election-namespace", "garden", "namespace of the Lease")
	fs.StringVar(&c.LeaderElection.Name, "leader-election-name", "housekeeper-bridge", "name of the Lease")
	hostname, _ := os.Hostname()
	fs.StringVar(&c.LeaderElection.Identity, "leader-election-identity", hostname, "identity in the Lease (default: hostname, the pod name)")
	if err := config.Parse(fs, args); err != nil {
		return nil, err
	}
	c.Bridge.Types, c.Bridge.Classes = c.types, c.classes
	if err := c.Kube.Validate(); err != nil {
		return nil, err
	}
	if c.Bridge.Cluster == "" {
		return nil, fmt.Errorf("--cluster (or %s) is required: it names this cluster in every event", config.EnvName("cluster"))
	}
	return c, nil
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
			return g.Wait()
		}
		if !c.LeaderElect {
			return run(ctx)
		}
		return RunAsLeader(ctx, cfg, c.LeaderElection, log, run)
	})
	return g.Wait()
}
