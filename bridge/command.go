package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/health"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// Command is the bridge binary's configuration.
type Command struct {
	Kube           kube.Options
	NATS           natsconn.Options
	Log            logging.Options
	Bridge         Options
	types, classes config.List
	LeaderElect    bool
	LeaderElection LeaderElection
	Addr           string
}

// ParseCommand reads flags and HOUSEKEEPER_* environment variables.
func ParseCommand(args []string) (*Command, error) {
	c := &Command{}
	fs := flag.NewFlagSet("housekeeper-bridge", flag.ContinueOnError)
	c.Kube.BindFlags(fs, os.Getenv("KUBECONFIG"))
	c.NATS.BindFlags(fs)
	c.Log.BindFlags(fs)
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
	fs.StringVar(&c.Addr, "addr", ":8080", "address of /healthz, /readyz and /metrics")
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
	log, err := logging.New(c.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	logging.RouteLibraries(log)
	c.Bridge.Logger = log

	cfg, err := c.Kube.Config()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg = kube.Instrument(cfg, reg)
	nc, err := natsconn.Connect(c.NATS, events.IdentityBridge, "housekeeper-bridge", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	b, err := New(cfg, js, reg, c.Bridge)
	if err != nil {
		return err
	}
	var leading atomic.Bool
	srv := &health.Server{Addr: c.Addr, Registry: reg, Ready: func() error {
		switch {
		case !nc.IsConnected():
			return errors.New("not connected to NATS")
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
