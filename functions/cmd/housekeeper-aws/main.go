// Command housekeeper-aws is housekeeper with only the aws object store provider linked: the
// image of a seed whose backups are on aws. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, s3.Plugin)
	stop()
	os.Exit(code)
}
