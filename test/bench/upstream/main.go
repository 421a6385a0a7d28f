// Command upstream runs upstream provider-local's BackupBucket and BackupEntry controllers as
// a process, as gardener's extension process runs them: a controller-runtime manager with
// leader election on a Lease, reacting to gardenlet's operation annotation. test/bench starts
// it beside housekeeper's processes to compare what each costs at rest and how long each takes
// from exec to its first reconcile. It counts its API requests as housekeeper's processes do
// (kube.Instrument), served on --addr's /metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/test/bench/providerlocal"
)

func main() {
	root := flag.String("root", "", "directory of the local provider's buckets")
	addr := flag.String("addr", "127.0.0.1:0", "address of /metrics (API requests sent)")
	leaderElect := flag.Bool("leader-elect", true, "elect a leader on a Lease, as deployed")
	namespace := flag.String("leader-election-namespace", "garden", "namespace of the Lease")
	flag.Parse()
	if err := run(*root, *addr, *leaderElect, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

func run(root, addr string, leaderElect bool, namespace string) error {
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
	go func() {
		err := http.ListenAndServe(addr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		log.Error("metrics server ended", zap.Error(err))
	}()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mgr, err := providerlocal.NewManager(ctx, cfg, root, zapr.NewLogger(log), manager.Options{
		LeaderElection:          leaderElect,
		LeaderElectionID:        "provider-local-leader-election",
		LeaderElectionNamespace: namespace,
	})
	if err != nil {
		return err
	}
	log.Info("starting", zap.Time("at", time.Now()))
	return mgr.Start(ctx)
}
