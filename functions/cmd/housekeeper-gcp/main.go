// Command housekeeper-gcp is housekeeper with only the gcp object store provider linked: the
// image of a seed whose backups are on gcp. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, gcs.Plugin)
	stop()
	os.Exit(code)
}
