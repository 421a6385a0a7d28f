// Command housekeeper is the operators' tool: replay, resync and dead letters. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
