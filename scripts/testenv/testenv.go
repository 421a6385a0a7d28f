// Package testenv starts, for one test, the real components it asks for — kube-apiserver and
// etcd with housekeeper's CRDs, nats-server with JetStream, Azurite, an S3 server, a GCS
// server, Swift with Keystone — on free loopback ports. It stops them when the test ends and keeps their logs when the test failed.
package testenv

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Env is what Start started; components not asked for are nil.
type Env struct {
	Kube *stack.Kube
	NATS *stack.NATS
	// NATSCluster is set instead of NATS by WithNATSCluster.
	NATSCluster *stack.NATSCluster
	Azurite     *stack.Azurite
	S3          *stack.S3
	GCS         *stack.GCS
	Swift       *stack.Swift

	// LogDir holds one log file per component; it is kept when the test fails.
	LogDir string
}

// Option chooses a component.
type Option func(*options)

type options struct {
	kube, nats, azurite, s3, gcs, swift bool
	natsNodes                           int
	azuriteAccounts                     []string
}

// WithKube starts kube-apiserver and etcd with the BackupBucket and BackupEntry CRDs.
func WithKube() Option { return func(o *options) { o.kube = true } }

// WithNATS starts nats-server with JetStream on file storage.
func WithNATS() Option { return func(o *options) { o.nats, o.natsNodes = true, 0 } }

// WithNATSCluster starts nats-server as nodes separate processes (1, or 3 routed on loopback)
// instead of an embedded server, as production runs it: a node can be killed.
// The later of WithNATS and WithNATSCluster wins.
func WithNATSCluster(nodes int) Option {
	return func(o *options) { o.nats, o.natsNodes = false, nodes }
}

// WithAzurite starts Azurite's blob service in memory.
func WithAzurite() Option { return func(o *options) { o.azurite = true } }

// WithAzuriteAccounts starts Azurite serving these accounts too ("name:key1:key2", as
// azurecloud.Cloud.AzuriteAccounts lists them).
func WithAzuriteAccounts(accounts ...string) Option {
	return func(o *options) { o.azurite, o.azuriteAccounts = true, accounts }
}

// WithGCS starts a GCS server (fake-gcs-server), its data in memory.
func WithGCS() Option { return func(o *options) { o.gcs = true } }

// WithSwift starts OpenStack Swift behind Keystone, their data in the log directory.
func WithSwift() Option { return func(o *options) { o.swift = true } }

// WithS3 starts an S3 server (versitygw) with versioning, its data in the log directory.
func WithS3() Option { return func(o *options) { o.s3 = true } }

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

var routeLibraries sync.Once

// Start starts the chosen components, failing the test if one cannot start.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	// client-go and controller-runtime (envtest among them) log through globals: send their
	// warnings to stderr once, in zap, rather than have controller-runtime complain that no
	// logger was set.
	routeLibraries.Do(func() {
		enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
		logging.RouteLibraries(zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.WarnLevel)))
	})
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logDir, err := os.MkdirTemp("", "housekeeper-"+unsafeChars.ReplaceAllString(t.Name(), "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{LogDir: logDir}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})

	if o.kube {
		f := env.logFile(t, "kube-apiserver-etcd.log")
		kube, err := stack.StartKube(f)
		if err != nil {
			t.Fatalf("kube-apiserver: %v", err)
		}
		env.Kube = kube
		t.Cleanup(func() {
			if err := kube.Stop(); err != nil {
				t.Errorf("stopping kube-apiserver: %v", err)
			}
		})
	}
	if o.nats {
		logger := fileLogger(env.logFile(t, "nats-server.log"))
		nats, err := stack.StartNATS(filepath.Join(logDir, "jetstream"), stack.NATSLogger(logger))
		if err != nil {
			t.Fatalf("nats-server: %v", err)
		}
		env.NATS = nats
		t.Cleanup(nats.Stop)
	}
	if o.natsNodes > 0 {
		cluster, err := stack.StartNATSCluster(logDir, o.natsNodes, "", func(name string) io.Writer {
			return env.logFile(t, "nats-"+name+".log")
		})
		if err != nil {
			t.Fatalf("nats-server cluster: %v", err)
		}
		env.NATSCluster = cluster
		t.Cleanup(cluster.Stop)
	}
	if o.azurite {
		azurite, err := stack.StartAzurite(env.logFile(t, "azurite.log"), o.azuriteAccounts...)
		if err != nil {
			t.Fatalf("azurite: %v", err)
		}
		env.Azurite = azurite
		t.Cleanup(azurite.Stop)
	}
	if o.s3 {
		s3, err := stack.StartS3(filepath.Join(logDir, "s3"), env.logFile(t, "s3.log"))
		if err != nil {
			t.Fatalf("s3: %v", err)
		}
		env.S3 = s3
		t.Cleanup(s3.Stop)
	}
	if o.gcs {
		gcs, err := stack.StartGCS(env.logFile(t, "gcs.log"))
		if err != nil {
			t.Fatalf("gcs: %v", err)
		}
		env.GCS = gcs
		t.Cleanup(gcs.Stop)
	}
	if o.swift {
		swift, err := stack.StartSwift(filepath.Join(logDir, "swift"), func(name string) io.Writer {
			return env.logFile(t, name+".log")
		})
		if err != nil {
			t.Fatalf("swift: %v", err)
		}
		env.Swift = swift
		t.Cleanup(swift.Stop)
	}
	return env
}

func (e *Env) logFile(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(e.LogDir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// Client returns a controller-runtime client for the API server with Gardener's extension
// types registered.
func (e *Env) Client(t testing.TB) client.Client {
	t.Helper()
	c, err := kube.NewClient(e.Kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Clientset returns a client-go clientset for the API server.
func (e *Env) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// fileLogger is a human-readable zap logger writing to f.
func fileLogger(f *os.File) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zapcore.DebugLevel))
}

// NATSURL is the client URL of the test's nats-server, or its cluster's nodes' URLs
// comma-separated.
func (e *Env) NATSURL() string {
	if e.NATSCluster != nil {
		return e.NATSCluster.URL
	}
	return e.NATS.URL
}

// Connect returns a NATS connection to the test's nats-server, reconnecting through restarts
// and closed when the test ends, with its JetStream context (natsconn.NewJetStream).
func (e *Env) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(e.NATSURL(), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// As housekeeper's processes publish: waiting out leader elections.
	js, err := natsconn.NewJetStream(nc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Eventually polls cond every 100 ms until it holds, failing the test after timeout with what
// it waited for and cond's last word.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := stack.Poll(timeout, 100*time.Millisecond, what, func() (bool, string, error) {
		ok, state := cond()
		return ok, state, nil
	}); err != nil {
		t.Fatal(err)
	}
}
