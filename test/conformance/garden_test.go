// Package conformance runs a backup extension under Gardener's own gardenlet controllers on real
// components: a garden (kube-apiserver, etcd and gardener-apiserver from gardener's
// test/envtest), seeds with their own kube-apiservers, gardenlet's BackupBucket and BackupEntry
// reconcilers on each seed, and the extension under test — housekeeper as processes, or, as
// the control, upstream provider-local's extension controllers in-process. Core objects are
// driven with gardener's own deployers, so gardenlet, not a test double, judges the extension.
package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	testclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	stackgarden "github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
)

// gardenerModuleDir is where the gardener module's source is, for its seed CRDs.
func gardenerModuleDir(t testing.TB) string {
	t.Helper()
	dir, err := stackgarden.ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// garden is the garden cluster shared by every implementation's run.
type garden struct {
	cfg    *rest.Config
	client client.Client
}

// shiftClock is gardenlet's clock: a fake clock kept at real time plus an offset the test moves,
// so gardenlet's timestamps stay comparable to the extension's (which uses real time) while a
// deletion grace period can still be passed without waiting.
type shiftClock struct {
	*testclock.FakeClock
	offset atomic.Int64
}

func startShiftClock(t testing.TB) *shiftClock {
	c := &shiftClock{FakeClock: testclock.NewFakeClock(time.Now())}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.SetTime(time.Now().Add(time.Duration(c.offset.Load())))
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// Shift moves gardenlet's clock to real time plus d.
func (c *shiftClock) Shift(d time.Duration) {
	c.offset.Store(int64(d))
	c.SetTime(time.Now().Add(d))
}

// logs collects the components' logs of one test in a directory kept when the test fails.
type logs struct {
	dir string
	mu  sync.Mutex
}

func newLogs(t *testing.T) *logs {
	dir, err := os.MkdirTemp("", "housekeeper-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return &logs{dir: dir}
}

func (l *logs) file(t testing.TB, name string) *os.File {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(l.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// logger is a zap logger (as logr) writing to the named file in the log directory.
func (l *logs) logger(t testing.TB, name string) logr.Logger {
	return stackgarden.Logger(l.file(t, name))
}

// zap is a human-readable zap logger writing to the named file in the log directory.
func (l *logs) zap(t testing.TB, name string) *zap.Logger {
	return stackgarden.ZapLogger(l.file(t, name))
}

var routeOnce sync.Once

// routeLibraryLogs sends the global loggers of client-go and controller-runtime to stderr at
// warning level, once.
func routeLibraryLogs() {
	routeOnce.Do(func() {
		enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
		logging.RouteLibraries(zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.WarnLevel)))
	})
}

// sharedGarden is the garden of every test in this binary: gardener-apiserver registers its
// feature gates process-wide, once, so a second one in the same process panics. Each test
// works in its own project, namespace and seeds. TestMain stops it.
var sharedGarden struct {
	once sync.Once
	g    *stackgarden.Garden
	dir  string
	err  error
}

// startGarden returns the garden: kube-apiserver and etcd from housekeeper's control-plane
// cache and gardener-apiserver in-process (scripts/stack/garden), started by the first test
// that asks.
func startGarden(t *testing.T, _ *logs) *garden {
	t.Helper()
	sharedGarden.once.Do(func() {
		if sharedGarden.dir, sharedGarden.err = os.MkdirTemp("", "housekeeper-conformance-garden-"); sharedGarden.err != nil {
			return
		}
		out, err := os.Create(filepath.Join(sharedGarden.dir, "garden-apiservers.log"))
		if err != nil {
			sharedGarden.err = err
			return
		}
		sharedGarden.g, sharedGarden.err = stackgarden.Start(stackgarden.Options{Dir: sharedGarden.dir, Output: out, WorkloadIdentityIssuer: workloadIdentityIssuer})
	})
	if sharedGarden.err != nil {
		t.Fatalf("starting the garden (logs in %s): %v", sharedGarden.dir, sharedGarden.err)
	}
	return &garden{cfg: sharedGarden.g.Config, client: sharedGarden.g.Client}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedGarden.g != nil {
		if err := sharedGarden.g.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the garden: %v\n", err)
			code = max(code, 1)
		}
	}
	if housekeeperBinaries.dir != "" {
		<-housekeeperBinaries.done
		_ = os.RemoveAll(housekeeperBinaries.dir)
	}
	if code == 0 && sharedGarden.dir != "" {
		_ = os.RemoveAll(sharedGarden.dir)
	} else if sharedGarden.dir != "" {
		fmt.Fprintf(os.Stderr, "garden logs kept in %s\n", sharedGarden.dir)
	}
	os.Exit(code)
}

// workloadIdentityIssuer is the iss claim of the garden's workload identity tokens.
const workloadIdentityIssuer = "https://issuer.housekeeper-conformance.test"

// housekeeperBinaries are the housekeeper and housekeeper-bridge binaries of every test in this
// binary, built once (startBuildingHousekeeper).
var housekeeperBinaries struct {
	once sync.Once
	done chan struct{}
	dir  string
	err  error
}

// startBuildingHousekeeper starts compiling the housekeeper and housekeeper-bridge binaries, of
// this module or of the checkout HOUSEKEEPER_CONFORMANCE_SOURCE names (e.g. a git worktree at an
// older commit, to judge it with this suite), once per test binary, while the caller starts its
// garden and seeds. The function it returns waits for them and gives their directory.
func startBuildingHousekeeper() func(t testing.TB) string {
	b := &housekeeperBinaries
	b.once.Do(func() {
		b.done = make(chan struct{})
		go func() {
			defer close(b.done)
			if b.dir, b.err = os.MkdirTemp("", "housekeeper-conformance-bin-"); b.err != nil {
				return
			}
			b.err = stack.BuildHousekeeper(context.Background(), os.Getenv("HOUSEKEEPER_CONFORMANCE_SOURCE"), b.dir, true)
		}()
	})
	return func(t testing.TB) string {
		t.Helper()
		<-b.done
		if b.err != nil {
			t.Fatalf("building housekeeper: %v", b.err)
		}
		return b.dir
	}
}
