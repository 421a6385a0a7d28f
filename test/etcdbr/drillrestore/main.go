// Command drillrestore runs housekeeper's drill (functions/drill) on one prefix of a local bucket
// directory and prints its Result as JSON: BenchmarkDrillRestore runs it as a process of its own,
// beside `etcdbrctl restore` on the same snapshots, so that both are measured the same way (wall
// time, CPU and peak RSS of one process). `housekeeper drill` reads its bucket through a
// BackupEntry and needs an API server; the drill's work is the same.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

func main() {
	root := flag.String("root", "", "the directory holding the bucket directories (etcd-backup-restore's $HOME for --storage-provider=Local)")
	bucket := flag.String("bucket", "", "the bucket directory under root (STORAGE_CONTAINER)")
	prefix := flag.String("prefix", "", "the snapshots' prefix in the bucket, <entry>/etcd-main/")
	workDir := flag.String("work-dir", "", "where the throwaway etcd's files go")
	flag.Parse()
	if err := run(*root, *bucket, *prefix, *workDir); err != nil {
		fmt.Fprintln(os.Stderr, "drillrestore:", err)
		os.Exit(1)
	}
}

func run(root, bucket, prefix, workDir string) error {
	store, err := local.New(root).Open(bucket, nil)
	if err != nil {
		return err
	}
	res, err := drill.Run(context.Background(), store, prefix, drill.Options{WorkDir: workDir})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
