package runtime

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

// Serve runs fn in mode until ctx is done. addr serves /healthz, /readyz and /metrics, and in
// HTTP mode the events as well (Knative gives a container one port). js is needed in pull
// mode, and by functions that publish; /readyz then requires a NATS connection.
func Serve(ctx context.Context, fn Function, mode Mode, addr string, js jetstream.JetStream, reg *prometheus.Registry, log *zap.Logger, opts ...WorkerOption) error {
	srv := healthServer(addr, reg, js) // entry and purge publish to JetStream in either mode
	switch mode {
	case ModeHTTP:
		h, err := HTTPHandler(fn, reg, log)
		if err != nil {
			return err
		}
		srv.Root = h
		// Knative's activator holds the first request until the pod is ready: the start is
		// over once it serves.
		startup := workerOptionsOf(opts).startup
		startup.Mark("serving")
		startup.Done()
		log.Info("serving CloudEvents over HTTP", zap.String("function", fn.Name), zap.String("addr", addr))
		return srv.Run(ctx)
	case ModePull:
		return servePull(ctx, srv, []Function{fn}, js, reg, log, opts)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// ServePull runs fns in pull mode until ctx is done, each from its durable consumer, in one
// process serving /healthz, /readyz and /metrics on addr: the forwarder of every function.
func ServePull(ctx context.Context, fns []Function, addr string, js jetstream.JetStream, reg *prometheus.Registry, log *zap.Logger, opts ...WorkerOption) error {
	return servePull(ctx, healthServer(addr, reg, js), fns, js, reg, log, opts)
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

func servePull(ctx context.Context, srv *health.Server, fns []Function, js jetstream.JetStream, reg *prometheus.Registry, log *zap.Logger, opts []WorkerOption) error {
	if js == nil {
		return errors.New("pull mode needs a JetStream connection")
	}
	workers := make([]*Worker, len(fns))
	for i, fn := range fns {
		w, err := NewWorker(js, fn, reg, append([]WorkerOption{WithLogger(log)}, opts...)...)
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
