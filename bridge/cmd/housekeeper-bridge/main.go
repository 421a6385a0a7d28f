// Command housekeeper-bridge publishes BackupBucket and BackupEntry changes as CloudEvents on
// NATS JetStream. See package bridge.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/bridge"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := bridge.ParseCommand(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Print(bridge.Usage())
		return
	}
	if err == nil {
		err = cmd.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "housekeeper-bridge:", err)
		os.Exit(1)
	}
}
