// Command faults is `make faults`: the fault suite's full form. See package faults.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/scripts/faults"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

func main() {
	short := flag.Bool("short", false, "the short form, as make test runs it")
	seed := flag.Uint64("seed", 0, "random seed of the workload and the faults (0: from the clock); every run prints it")
	cluster := flag.Bool("cluster", false, "on a three-node JetStream cluster with R3 streams, killing leaders and taking quorum away")
	flag.Parse()
	cfg := faults.Full()
	if *short {
		cfg = faults.Short()
	}
	if *cluster {
		cfg = cfg.OnCluster()
	}
	root, err := stack.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	cfg.Seed, cfg.Out = *seed, os.Stdout
	cfg.Dir = filepath.Join(root, ".local", "faults")
	_ = os.RemoveAll(cfg.Dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := faults.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	if err := report.Print(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "faults: writing the report:", err)
	}
	if !report.OK() {
		fmt.Printf("\nFAILED: logs and stores are in %s\n", cfg.Dir)
		os.Exit(1)
	}
}
