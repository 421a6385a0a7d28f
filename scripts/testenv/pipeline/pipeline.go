// Package pipeline runs housekeeper's whole event path for a test — a real kube-apiserver,
// nats-server and Azurite, the bridge publishing to the streams, and the functions the test
// asks for consuming them — so a test drives it through the Kubernetes API only.
package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/functions/setup"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// Cluster is the cluster name events carry.
const Cluster = "pipeline-test"

// Scope is what the pipeline's bridge serves: every type housekeeper implements, class shoot.
var Scope = gardener.Scope{Types: gardener.ImplementedTypes, Classes: []string{"shoot"}}

// Pipeline is a running event path.
type Pipeline struct {
	T      testing.TB
	Env    *testenv.Env
	Client client.Client
	NC     *nats.Conn
	JS     jetstream.JetStream
	Log    *zap.Logger
	// Auth is set when NATS is secured (StartSecure): every component connects as itself.
	Auth *natsconn.Issued
	// Metrics holds the metrics of the functions RunFunction built.
	Metrics *prometheus.Registry

	identities map[string]jetstream.JetStream
	// setup are the options Start set up with, which Setup sets up with again.
	setup setup.Options
}

// Start starts the components and the bridge; extra adds components (testenv.WithS3) or
// replaces them (testenv.WithNATSCluster).
func Start(t testing.TB, extra ...testenv.Option) *Pipeline {
	t.Helper()
	return start(t, "", nil, extra...)
}

// StartWithSetup is Start with the setup's options changed by adjust
// (e.g. func(o *setup.Options) { o.MaxAge = 3 * time.Second }).
func StartWithSetup(t testing.TB, adjust func(*setup.Options), extra ...testenv.Option) *Pipeline {
	t.Helper()
	return start(t, "", adjust, extra...)
}

// StartSecure is Start with NATS secured as an operator runs it: TLS with client certificates,
// and the bridge, setup, the functions and the test itself (as the operator) each connected as
// its own identity with the permissions `housekeeper nats-auth` issues in form.
func StartSecure(t testing.TB, form natsconn.Form, extra ...testenv.Option) *Pipeline {
	t.Helper()
	return start(t, form, nil, extra...)
}

func start(t testing.TB, secure natsconn.Form, adjustSetup func(*setup.Options), extra ...testenv.Option) *Pipeline {
	t.Helper()
	opts := []testenv.Option{testenv.WithKube(), testenv.WithAzurite()}
	if secure == "" {
		opts = append(opts, testenv.WithNATS())
	}
	env := testenv.Start(t, append(opts, extra...)...)
	p := &Pipeline{T: t, Env: env, Client: env.Client(t), Log: zaptest.NewLogger(t), Metrics: prometheus.NewRegistry()}
	if secure != "" {
		p.Auth = startSecureNATS(t, env, secure)
	}
	p.NC, p.JS = p.ConnectAs(events.IdentityOperator)
	p.setup = p.defaultSetup()
	if adjustSetup != nil {
		adjustSetup(&p.setup)
	}
	p.Setup()

	b, err := bridge.New(env.Kube.Config, p.JSFor(events.IdentityBridge), nil, bridge.Options{Cluster: Cluster, Scope: Scope, Logger: p.Log.Named("bridge")})
	if err != nil {
		t.Fatal(err)
	}
	p.background("bridge", b.Run)
	p.background("bridge resync", func(ctx context.Context) error { return b.ServeResync(ctx, p.JSFor(events.IdentityBridge).Conn()) })
	// Objects a test creates from here on are news to the bridge (created events), not part
	// of its initial list (synced events), however slowly a loaded machine starts it.
	p.Eventually(60*time.Second, "the bridge's initial lists", func() (bool, string) { return b.Synced(), "not synced" })
	return p
}

// ackWait is the ack wait of every consumer the setup creates: a killed worker's event comes
// back within seconds.
const ackWait = 3 * time.Second

// defaultSetup are the options the pipeline sets up with unless told otherwise: every
// function's consumer with a short ack wait, and a copy of each stream per NATS node.
func (p *Pipeline) defaultSetup() setup.Options {
	replicas := 1
	if p.Env.NATSCluster != nil {
		replicas = len(p.Env.NATSCluster.Nodes)
	}
	consumer := runner.DefaultConsumerSettings()
	consumer.AckWait = ackWait
	return setup.Options{Replicas: replicas, Consumer: consumer, Functions: all.Functions,
		Log: p.Log.Named("setup").WithOptions(zap.IncreaseLevel(zap.WarnLevel))}
}

// Setup runs the setup, as every deployment does before the bridge and the functions start and
// the setup Job does again after a change: the streams and every function's consumer, with the
// options Start set up with, connected as the setup identity.
func (p *Pipeline) Setup() {
	p.T.Helper()
	if err := setup.Run(context.Background(), p.JSFor(events.IdentitySetup), p.setup); err != nil {
		p.T.Fatalf("setup: %v", err)
	}
}

// Run runs fn in pull mode until the test ends, connected as its own identity; its consumer is
// the one setUp created. A function that publishes is built with p.JSFor(its name).
func (p *Pipeline) Run(fn runner.Function, opts ...runner.WorkerOption) {
	p.T.Helper()
	opts = append([]runner.WorkerOption{runner.WithLogger(p.Log.Named(fn.Name)), runner.WithBackoff(100*time.Millisecond, time.Second)}, opts...)
	w, err := runner.NewWorker(p.JSFor(fn.Name), fn, prometheus.NewRegistry(), opts...)
	if err != nil {
		p.T.Fatal(err)
	}
	p.background(fn.Name, w.Run)
}

// RunFunction builds def as the binary builds it — its own flags from args, the pipeline's
// Kubernetes client and configuration, the JetStream of def's own identity, stores and the
// pipeline's cluster — and runs it until the test ends. A function serving Gardener objects
// serves the types of stores unless args say otherwise.
func (p *Pipeline) RunFunction(def runner.Definition, stores objectstore.Registry, args ...string) {
	p.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.T.Cleanup(cancel)
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--types") }) {
		args = append(gardener.ScopeArgs(def, slices.Sorted(maps.Keys(stores))...), args...)
	}
	fn, err := def.Build(ctx, runner.Deps{Config: p.Env.Kube.Config, Client: p.Client, JetStream: p.JSFor(def.Name),
		Stores: stores, Cluster: Cluster, Log: p.Log, Metrics: p.Metrics}, args...)
	if err != nil {
		p.T.Fatal(err)
	}
	p.Run(fn)
}

// NATSOptions are the options identity connects with.
func (p *Pipeline) NATSOptions(identity string) natsconn.Options {
	if p.Auth == nil {
		return natsconn.Options{URL: p.Env.NATSURL()}
	}
	return p.Auth.Options(p.Env.NATSURL(), identity)
}

// NATSArgs are NATSOptions as housekeeper's command-line flags.
func (p *Pipeline) NATSArgs(identity string) []string {
	if p.Auth == nil {
		return []string{"--nats-url", p.Env.NATSURL()}
	}
	return p.Auth.Args(p.Env.NATSURL(), identity)
}

// ConnectAs connects to NATS as identity until the test ends, reconnecting through restarts.
func (p *Pipeline) ConnectAs(identity string) (*nats.Conn, jetstream.JetStream) {
	p.T.Helper()
	if p.Auth == nil {
		return p.Env.Connect(p.T)
	}
	nc, err := natsconn.Connect(p.NATSOptions(identity), identity, "housekeeper-"+identity, p.Log.Named("nats-"+identity))
	if err != nil {
		p.T.Fatal(err)
	}
	p.T.Cleanup(nc.Close)
	js, err := natsconn.NewJetStream(nc, p.Log.Named("nats-"+identity))
	if err != nil {
		p.T.Fatal(err)
	}
	return nc, js
}

// JSFor returns JetStream connected as identity: one connection per identity when NATS is
// secured, the test's own otherwise.
func (p *Pipeline) JSFor(identity string) jetstream.JetStream {
	p.T.Helper()
	if p.Auth == nil {
		return p.JS
	}
	if js, ok := p.identities[identity]; ok {
		return js
	}
	_, js := p.ConnectAs(identity)
	if p.identities == nil {
		p.identities = map[string]jetstream.JetStream{}
	}
	p.identities[identity] = js
	return js
}

func (p *Pipeline) background(name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			p.T.Errorf("%s: %v", name, err)
		}
	}()
	p.T.Cleanup(func() { cancel(); <-done })
}

// Eventually polls cond until it holds, failing the test after timeout with cond's last word.
func (p *Pipeline) Eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	p.T.Helper()
	testenv.Eventually(p.T, timeout, what, cond)
}

// DeadLetters lists the dead letters of function.
func (p *Pipeline) DeadLetters(function string) []runner.DeadLetter {
	p.T.Helper()
	dls, err := runner.ListDeadLetters(context.Background(), p.JS, function)
	if err != nil {
		p.T.Fatal(err)
	}
	return dls
}

// Handled waits for a positive sign that function has handled the change of obj to its
// current resourceVersion: the bridge published an event of eventType carrying that
// resourceVersion, and the function's consumer has nothing pending or unacknowledged. A test
// that expects a function to do nothing checks, after this, that nothing changed.
func (p *Pipeline) Handled(function, eventType string, obj client.Object) {
	p.T.Helper()
	subject, err := events.Subject(eventType, obj.GetName())
	if err != nil {
		p.T.Fatal(err)
	}
	header := "ce-" + events.ExtResourceVersion
	p.Eventually(30*time.Second, fmt.Sprintf("%s handling %s at resourceVersion %s", function, subject, obj.GetResourceVersion()), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := p.JS.Stream(ctx, events.RecordStream)
		if err != nil {
			return false, err.Error()
		}
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return false, "no event yet: " + err.Error()
		}
		if rv := msg.Header.Get(header); rv != obj.GetResourceVersion() {
			return false, "last event carries resourceVersion " + rv
		}
		return p.drained(ctx, function)
	})
}

// Drained waits until function's consumer has nothing pending and nothing unacknowledged: it
// has handled every event published so far.
func (p *Pipeline) Drained(function string) {
	p.T.Helper()
	p.Eventually(30*time.Second, function+" has handled every event", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.drained(ctx, function)
	})
}

func (p *Pipeline) drained(ctx context.Context, function string) (bool, string) {
	consumer, err := p.JS.Consumer(ctx, events.RecordStream, function)
	if err != nil {
		return false, err.Error()
	}
	info, err := consumer.Info(ctx)
	if err != nil {
		return false, err.Error()
	}
	return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
}

// KillStreamLeader kills (SIGKILL) the nats-server process that leads the stream of record, the
// one holding every schedule, and returns its name; the pipeline must run on a NATS cluster.
func (p *Pipeline) KillStreamLeader() string {
	p.T.Helper()
	if p.Env.NATSCluster == nil {
		p.T.Fatal("KillStreamLeader needs a NATS cluster (testenv.WithNATSCluster)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		p.T.Fatal(err)
	}
	leader := stream.CachedInfo().Cluster
	if leader == nil || leader.Leader == "" {
		p.T.Fatalf("the stream has no leader: %+v", leader)
	}
	p.Env.NATSCluster.Node(leader.Leader).Kill()
	p.T.Logf("killed %s, the leader of the stream holding the schedules", leader.Leader)
	return leader.Leader
}
