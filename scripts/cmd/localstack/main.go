// Command localstack runs housekeeper's local stack on this machine, without Docker: a real
// kube-apiserver and etcd with the CRDs, nats-server with JetStream, and Azurite. It writes a
// kubeconfig for kubectl and runs until interrupted.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		os.Exit(1)
	}
}

func run() error {
	logger, err := logging.New(logging.Options{Format: "console"})
	if err != nil {
		return err
	}
	logging.RouteLibraries(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ".local")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs, err := os.Create(filepath.Join(dir, "kube-apiserver-etcd.log"))
	if err != nil {
		return err
	}
	defer logs.Close()

	logger.Info("starting kube-apiserver and etcd")
	kube, err := stack.StartKube(logs)
	if err != nil {
		return err
	}
	defer kube.Stop()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kube.Kubeconfig, 0o600); err != nil {
		return err
	}

	logger.Info("starting nats-server with JetStream")
	nats, err := stack.StartNATS(filepath.Join(dir, "jetstream"), stack.NATSLogger(logger.Named("nats-server").WithOptions(zap.IncreaseLevel(zap.WarnLevel))))
	if err != nil {
		return err
	}
	defer nats.Stop()

	azuriteLogs, err := os.Create(filepath.Join(dir, "azurite.log"))
	if err != nil {
		return err
	}
	defer azuriteLogs.Close()
	logger.Info("starting Azurite")
	azurite, err := stack.StartAzurite(azuriteLogs)
	if err != nil {
		return err
	}
	defer azurite.Stop()

	fmt.Printf(`
housekeeper local stack is up (Ctrl-C stops it)
  kubectl:  export KUBECONFIG=%s
  NATS:     %s   (monitoring %s)
  Azurite:  %s   (account %s)
  logs:     %s
`, kubeconfig, nats.URL, nats.MonitorURL, azurite.Endpoint, stack.AzuriteAccount, dir)
	<-ctx.Done()
	logger.Info("stopping")
	return nil
}
