// Command housekeeper runs housekeeper's functions with every object store provider linked,
// and the operators' tools: setup, replay, resync and dead letters. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, providers.All...)
	stop()
	os.Exit(code)
}
