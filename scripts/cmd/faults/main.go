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
	seed := flag.Uint64("seed", 0, "random seed (0: from the clock); the report prints it")
	flag.Parse()
	cfg := faults.Full()
	if *short {
		cfg = faults.Short()
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
	report.Print(os.Stdout)
	if !report.OK() {
		fmt.Printf("\nFAILED: logs and stores are in %s\n", cfg.Dir)
		os.Exit(1)
	}
}
