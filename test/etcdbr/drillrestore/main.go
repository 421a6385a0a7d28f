// Command drillrestore runs housekeeper's drill (functions/drill) on one prefix of a local bucket
// directory and prints its Result as JSON: BenchmarkDrillRestore runs it as a process of its own,
// beside `etcdbrctl restore` on the same snapshots, so that both are measured the same way (wall
// time, CPU and peak RSS of one process, its children included). `housekeeper drill` reads its
// bucket through a BackupEntry and needs an API server; the drill's work is the same.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

func main() {
	root := flag.String("root", "", "the directory holding the bucket directories (etcd-backup-restore's $HOME for --storage-provider=Local)")
	bucket := flag.String("bucket", "", "the bucket directory under root (STORAGE_CONTAINER)")
	prefix := flag.String("prefix", "", "the snapshots' prefix in the bucket, <entry>/etcd-main/")
	workDir := flag.String("work-dir", "", "where the throwaway etcd's files go")
	etcdbrctl := flag.String("etcdbrctl", "", "etcd-backup-restore's etcdbrctl: run its restore too and compare (as `housekeeper drill --etcdbrctl`)")
	live := flag.String("live", "", "the client URL of the etcd the backups are of: compare the restored store with it")
	flag.Parse()
	if err := run(*root, *bucket, *prefix, *workDir, *etcdbrctl, *live); err != nil {
		fmt.Fprintln(os.Stderr, "drillrestore:", err)
		os.Exit(1)
	}
}

func run(root, bucket, prefix, workDir, etcdbrctl, live string) error {
	ctx := context.Background()
	provider := local.New(root)
	store, err := provider.Open(bucket, nil)
	if err != nil {
		return err
	}
	opts := drill.Options{WorkDir: workDir}
	if etcdbrctl != "" {
		if opts.Etcdbrctl, err = drill.NewEtcdbrctl(ctx, etcdbrctl); err != nil {
			return err
		}
		if opts.EtcdbrStore, err = drill.NewEtcdbrStore(objectstore.Where{Type: local.Type, Bucket: bucket}, nil, prefix, objectstore.NewRegistry(provider)); err != nil {
			return err
		}
	}
	if live != "" {
		opts.Live = drill.LiveEndpoints([]string{live}, nil)
	}
	res, err := drill.Run(ctx, store, prefix, opts)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
