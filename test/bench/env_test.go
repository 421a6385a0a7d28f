package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// processStart is when the test binary started: go test's -timeout counts from about then.
var processStart = time.Now()

// env is one benchmark's world: a kube-apiserver with the CRDs, housekeeper's binaries, a
// directory of component logs, the driver's client (gardenlet's part) and the observer.
type env struct {
	kube    *stack.Kube
	logDir  string
	binDir  string
	root    string        // the local provider's bucket directories
	driver  client.Client // gardenlet's part: unlimited, not counted
	kubecfg string        // kubeconfig file for processes
	obs     *observer
}

// startEnv starts kube-apiserver and etcd, builds housekeeper and starts the observer. Every
// component logs to a file under a temporary directory whose path it prints.
func startEnv(b *testing.B) *env {
	b.Helper()
	logDir, err := os.MkdirTemp("", "housekeeper-bench-")
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench: component logs in %s\n", logDir)
	e := &env{logDir: logDir, root: filepath.Join(logDir, "buckets")}
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		b.Fatal(err)
	}
	routeLibraryLogs(e)

	var (
		wg       sync.WaitGroup
		buildErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.binDir, buildErr = buildHousekeeper(logDir)
	}()
	kapi, err := stack.StartKube(e.file(b, "kube-apiserver-etcd.log"))
	if err != nil {
		b.Fatalf("kube-apiserver: %v", err)
	}
	e.kube = kapi
	b.Cleanup(func() {
		if err := kapi.Stop(); err != nil {
			b.Errorf("stopping kube-apiserver: %v", err)
		}
	})
	wg.Wait()
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	e.kubecfg = filepath.Join(logDir, "kubeconfig")
	if err := os.WriteFile(e.kubecfg, kapi.Kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	if e.driver, err = kube.NewClient(unlimited(kapi.Config)); err != nil {
		b.Fatal(err)
	}
	if e.obs, err = startObserver(unlimited(kapi.Config)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.obs.stop)
	return e
}

// unlimited is a copy of cfg without a client-side rate limit.
func unlimited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

// file creates the named log file in the log directory.
func (e *env) file(b testing.TB, name string) *os.File {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(e.logDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	return f
}

// zap is a human-readable zap logger writing to the named log file.
func (e *env) zap(b testing.TB, name string) *zap.Logger {
	return fileLogger(e.file(b, name))
}

func (e *env) logr(b testing.TB, name string) logr.Logger { return zapr.NewLogger(e.zap(b, name)) }

func fileLogger(f *os.File) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zapcore.InfoLevel))
}

var routeOnce sync.Once

// routeLibraryLogs sends client-go's and controller-runtime's global loggers to a file (the
// first benchmark's log directory), so that stdout holds only the tables.
func routeLibraryLogs(e *env) {
	routeOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(e.logDir, "libraries.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		logging.RouteLibraries(fileLogger(f))
	})
}

// buildHousekeeper builds the function and bridge binaries into dir/bin, from this checkout
// or from the one HOUSEKEEPER_BENCH_SOURCE names (e.g. `git archive` of another commit).
func buildHousekeeper(dir string) (string, error) {
	fmt.Fprintln(os.Stderr, "bench: building housekeeper")
	bin := filepath.Join(dir, "bin")
	return bin, stack.BuildHousekeeper(context.Background(), os.Getenv("HOUSEKEEPER_BENCH_SOURCE"), bin, false)
}

// deadline is when the benchmark must have failed by itself rather than be killed by go
// test's -timeout: a minute before it.
func deadline() time.Time {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return processStart.Add(d - time.Minute)
		}
	}
	return time.Now().Add(24 * time.Hour)
}

// waitBudget is the time to wait for something that should take about as long as a burst of
// n entries: generous, but never past the deadline.
func waitBudget(n int) (time.Duration, bool) {
	want := 5*time.Minute + time.Duration(n)*500*time.Millisecond
	left := time.Until(deadline())
	if left < want {
		return left, true
	}
	return want, false
}
