package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/functions/health"
)

// Mode is how a function receives events.
type Mode string

const (
	// ModePull reads a durable JetStream pull consumer (Deployments scaled by KEDA).
	ModePull Mode = "pull"
	// ModeHTTP receives CloudEvents over HTTP (Knative Services).
	ModeHTTP Mode = "http"
)

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModePull, ModeHTTP:
		return Mode(s), nil
	}
	return "", fmt.Errorf("mode %q: want %s or %s", s, ModePull, ModeHTTP)
}

// Serving is how a function process serves: the mode, where, with what.
type Serving struct {
	Mode Mode
	// Addr serves /healthz, /readyz and /metrics, and in HTTP mode the events as well (Knative
	// gives a container one port).
	Addr string
	// JetStream is needed in pull mode, and by functions that publish; /readyz then requires a
	// NATS connection.
	JetStream jetstream.JetStream
	Metrics   *prometheus.Registry
	Log       *zap.Logger
	// Worker configures the pull mode's workers (the start's phases: also HTTP mode's).
	Worker []WorkerOption
}

// Serve runs fn as s says until ctx is done.
func Serve(ctx context.Context, fn Function, s Serving) error {
	srv := healthServer(s.Addr, s.Metrics, s.JetStream) // entry and purge publish to JetStream in either mode
	switch s.Mode {
	case ModeHTTP:
		h, err := HTTPHandler(fn, s.Metrics, s.Log)
		if err != nil {
			return err
		}
		srv.Root = h
		// Knative's activator holds the first request until the pod is ready: the start is
		// over once it serves.
		startup := workerOptionsOf(s.Worker).startup
		startup.Mark("serving")
		startup.Done()
		s.Log.Info("serving CloudEvents over HTTP", zap.String("function", fn.Name), zap.String("addr", s.Addr))
		return srv.Run(ctx)
	case ModePull:
		return servePull(ctx, srv, []Function{fn}, s)
	}
	return fmt.Errorf("unknown mode %q", s.Mode)
}

// ServePull runs fns in pull mode until ctx is done, each from its durable consumer, in one
// process serving /healthz, /readyz and /metrics on s.Addr: the forwarder of every function.
// s.Mode is not read.
func ServePull(ctx context.Context, fns []Function, s Serving) error {
	return servePull(ctx, healthServer(s.Addr, s.Metrics, s.JetStream), fns, s)
}

// healthServer serves /healthz, /readyz and /metrics on addr; with js, /readyz requires a
// NATS connection.
func healthServer(addr string, reg *prometheus.Registry, js jetstream.JetStream) *health.Server {
	srv := &health.Server{Addr: addr, Registry: reg}
	if js != nil {
		srv.Ready = func() error {
			if !js.Conn().IsConnected() {
				return errors.New("not connected to NATS")
			}
			return nil
		}
	}
	return srv
}

func servePull(ctx context.Context, srv *health.Server, fns []Function, s Serving) error {
	if s.JetStream == nil {
		return errors.New("pull mode needs a JetStream connection")
	}
	workers := make([]*Worker, len(fns))
	for i, fn := range fns {
		w, err := NewWorker(s.JetStream, fn, s.Metrics, append([]WorkerOption{WithLogger(s.Log)}, s.Worker...)...)
		if err != nil {
			return err
		}
		workers[i] = w
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	for _, w := range workers {
		g.Go(func() error { return w.Run(ctx) })
	}
	return g.Wait()
}
