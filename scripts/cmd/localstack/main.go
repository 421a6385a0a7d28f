// Command localstack is `make run`: housekeeper's whole stack on this machine, without
// Docker. See package localstack.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/scripts/localstack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

func main() {
	exitWhenDone := flag.Bool("exit-when-done", false, "exit once the examples are Succeeded, the purge completed and every live shoot and etcd backup restored by a drill")
	natsNodes := flag.Int("nats-nodes", 0, "run nats-server as processes: 1, or 3 for a JetStream cluster with the streams replicated 3 times (0: embedded)")
	flag.Parse()
	if err := run(*exitWhenDone, *natsNodes); err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		os.Exit(1)
	}
}

func run(exitWhenDone bool, natsNodes int) error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ".local")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The status table owns the terminal; the components log to .local/housekeeper.log.
	logs, err := os.Create(filepath.Join(dir, "housekeeper.log"))
	if err != nil {
		return err
	}
	defer logs.Close()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zapcore.InfoLevel))
	logging.RouteLibraries(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return localstack.Run(ctx, localstack.Options{Dir: dir, ExitWhenDone: exitWhenDone, NATSNodes: natsNodes, Out: os.Stdout, Log: log})
}
