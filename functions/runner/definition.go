package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Definition declares a function once: what it is called, what it consumes and publishes, its
// own flags and how its handler is built; the Definition makes that the Function, with its own
// Name and Types. The binary, the forwarders, the NATS permissions, setup, make run and every
// test harness construct functions from their Definition, so they all run the production
// configuration.
type Definition struct {
	// Name names the durable consumer, the dead-letter and redrive subjects and the NATS
	// identity.
	Name string
	// Types are the event types it consumes.
	Types []string
	// Publishes are the subjects it publishes its work on besides its retries and dead letters
	// (its NATS permission). A function that publishes needs JetStream in every mode and the
	// cluster name, the source of its events.
	Publishes []string
	// Bind registers the function's own flags on fs and returns its constructor, which reads
	// them once fs is parsed.
	Bind func(fs *flag.FlagSet) Constructor
	// Needs is what the function needs where it is deployed; the chart and docker compose read
	// it from infra/chart/files/functions.json, which `make registry` writes from the registry.
	Needs Needs
}

// Needs is what a function needs of the pod, the network and the installation it runs in.
type Needs struct {
	// APIServer: it talks to the Kubernetes API server.
	APIServer bool `json:"apiServer,omitempty"`
	// Stores: it opens object stores (the local provider's directory; public networks).
	Stores bool `json:"stores,omitempty"`
	// ReadOnlyStores: of the stores it opens, it only reads.
	ReadOnlyStores bool `json:"readOnlyStores,omitempty"`
	// WorkDir: a writable work directory, its $TMPDIR on the read-only root.
	WorkDir bool `json:"workDir,omitempty"`
	// OwnResources: its container's resources are its own chart value (functions.NAME.resources,
	// which the chart's schema then requires) rather than the shared functionResources, for what
	// it holds in memory follows its work (a drill's memoryBudget, the objects a copy streams).
	OwnResources bool `json:"ownResources,omitempty"`
	// Feature is the chart's value that turns the function on ("": always on), e.g.
	// "etcdBackupConfig" for etcdBackupConfig.enabled.
	Feature string `json:"feature,omitempty"`
}

// Constructor builds a function's handler from the shared dependencies. ctx bounds what it
// starts (caches, say).
type Constructor func(ctx context.Context, d Deps) (Handler, error)

// Deps are what functions are built from.
type Deps struct {
	// Config is the Kubernetes client configuration, for functions that start caches.
	Config *rest.Config
	Client client.Client
	// JetStream is nil for a function served over HTTP that publishes nothing.
	JetStream jetstream.JetStream
	Stores    objectstore.Registry
	// Cluster names this cluster in the events the function publishes.
	Cluster string
	Log     *zap.Logger
	// Metrics registers a function's own metrics; nil keeps them unregistered.
	Metrics prometheus.Registerer
	// FirstEventSettled is closed once the process settled its first event: work that pays
	// off only over many events (a cache) waits for it, so that a process started for a
	// waiting event (a scale from zero) serves that event first. nil: at once.
	FirstEventSettled <-chan struct{}
}

// ErrMissingCluster means a function that publishes events was given no cluster name.
var ErrMissingCluster = errors.New("a function that publishes events needs the cluster name")

// Publishing says whether the function publishes events of its own.
func (def Definition) Publishing() bool { return len(def.Publishes) > 0 }

// Function is the function def declares, served by h (its own handler, or one that forwards
// its events elsewhere).
func (def Definition) Function(h Handler) Function {
	return Function{Name: def.Name, Types: def.Types, Handler: h}
}

// Build builds the function from d with its own flags set by args (as on its command line):
// the construction of the binary, for in-process runs.
func (def Definition) Build(ctx context.Context, d Deps, args ...string) (Function, error) {
	fs := flag.NewFlagSet(def.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	construct := def.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return Function{}, fmt.Errorf("function %s: %w", def.Name, err)
	}
	return construct.Build(ctx, def, d)
}

// Build checks what every function needs and builds the function def declares with the
// handler c constructs.
func (c Constructor) Build(ctx context.Context, def Definition, d Deps) (Function, error) {
	if def.Publishing() && (d.Cluster == "" || d.JetStream == nil) {
		return Function{}, fmt.Errorf("function %s: %w and JetStream", def.Name, ErrMissingCluster)
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	d.Log = d.Log.Named(def.Name)
	h, err := c(ctx, d)
	if err != nil {
		return Function{}, fmt.Errorf("function %s: %w", def.Name, err)
	}
	fn := def.Function(h)
	return fn, fn.Validate()
}

// NoFlags is Bind for a function without flags of its own.
func NoFlags(c Constructor) func(*flag.FlagSet) Constructor {
	return func(*flag.FlagSet) Constructor { return c }
}
