// Command housekeeper-bridge publishes the changes of BackupBuckets, BackupEntries,
// EtcdBackupConfigs and RestoreDrills as CloudEvents on NATS JetStream. See package bridge.
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
	"github.com/housekeeper-dev/housekeeper/functions/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(version.String("housekeeper-bridge"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := bridge.ParseCommand(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Print(bridge.Usage())
		fmt.Print("\nhousekeeper-bridge --version prints its version.\n")
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
