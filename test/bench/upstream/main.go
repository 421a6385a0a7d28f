// Command upstream runs upstream provider-local's BackupBucket and BackupEntry controllers as
// a process, as gardener's extension process runs them: a controller-runtime manager with
// leader election on a Lease, reacting to gardenlet's operation annotation. test/bench starts
// it beside housekeeper's processes to compare what each costs at rest and how long each takes
// from exec to its first reconcile; test/seed runs it as a Deployment on the node (an image of
// it built static). It counts its API requests as housekeeper's processes do (kube.Instrument),
// served on --addr's /metrics with controller-runtime's own metrics (reconciles by controller
// and result, leader_election_master_status), beside provider-local's probes: /healthz (ping)
// and /readyz (its informers synced, gardener's informer-sync check).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	gardenerhealthz "github.com/gardener/gardener/pkg/healthz"
	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/test/bench/providerlocal"
)

func main() {
	begin := time.Now()
	root := flag.String("root", "", "directory of the local provider's buckets")
	addr := flag.String("addr", "127.0.0.1:0", "address of /metrics (API requests sent), /healthz and /readyz")
	leaderElect := flag.Bool("leader-elect", true, "elect a leader on a Lease, as deployed")
	namespace := flag.String("leader-election-namespace", "garden", "namespace of the Lease")
	classes := flag.String("extension-classes", "", "extension classes served, comma-separated, as provider-local's flag (empty: shoot)")
	cpuProfile := flag.String("cpu-profile", "", "write a CPU profile (pprof) of the process's life to this file when it ends, as housekeeper's processes do")
	flag.Parse()
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		defer stopProfile()
	}
	if err := run(begin, *root, *addr, *leaderElect, *namespace, *classes); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func run(begin time.Time, root, addr string, leaderElect bool, namespace, classList string) error {
	log, err := logging.New(logging.Options{})
	if err != nil {
		return err
	}
	logging.RouteLibraries(log)
	cfg, err := config.GetConfig() // --kubeconfig, controller-runtime's flag
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client limit: the benchmarks measure latency at rest
	reg := prometheus.NewRegistry()
	cfg = kube.Instrument(cfg, reg)

	var classes []extensionsv1alpha1.ExtensionClass
	for c := range strings.SplitSeq(classList, ",") {
		if c = strings.TrimSpace(c); c != "" {
			classes = append(classes, extensionsv1alpha1.ExtensionClass(c))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mgr, err := providerlocal.NewManager(ctx, cfg, root, zapr.NewLogger(log), manager.Options{
		LeaderElection:          leaderElect,
		LeaderElectionID:        "provider-local-leader-election",
		LeaderElectionNamespace: namespace,
	}, classes...)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	// controller-runtime registers its metrics on its global registry, which the manager would
	// serve on its own metrics server (off, see providerlocal.NewManager).
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, ctrlmetrics.Registry}, promhttp.HandlerOpts{}))
	// As the manager serves its probes: the handler serves its checks below the prefix.
	mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
	mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{"informer-sync": gardenerhealthz.NewCacheSyncHealthz(mgr.GetCache())}}))
	go func() {
		err := http.ListenAndServe(addr, mux)
		log.Error("metrics server ended", zap.Error(err))
	}()
	log.Info("starting", zap.Time("at", time.Now()), zap.Int64("started_at_unix_nano", begin.UnixNano()))
	return mgr.Start(ctx)
}
