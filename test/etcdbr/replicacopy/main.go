// Command replicacopy copies one prefix from a local bucket directory to an S3 bucket with
// housekeeper's copier (functions/objectstore/replica, the copy function's) and prints its
// Report as JSON: BenchmarkCopy runs it as a process of its own, beside `etcdbrctl copy` on the
// same snapshots, so that both are measured the same way (wall time, CPU and peak RSS of one
// process). The copy function reads its stores through a BackupCopyPolicy and needs an API
// server; the copy's work is the same.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

func main() {
	root := flag.String("source-root", "", "the directory holding the source's bucket directories (etcd-backup-restore's $HOME for --storage-provider=Local)")
	srcBucket := flag.String("source-bucket", "", "the source's bucket directory under source-root")
	dstBucket := flag.String("bucket", "", "the destination S3 bucket, which must exist")
	credentials := flag.String("credentials", "", "a directory holding the destination's etcd-backup secret as files (accessKeyID, secretAccessKey, region, endpoint, s3ForcePathStyle)")
	prefix := flag.String("prefix", "", "the prefix copied, <entry>/")
	flag.Parse()
	if err := run(*root, *srcBucket, *dstBucket, *credentials, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "replicacopy:", err)
		os.Exit(1)
	}
}

func run(root, srcBucket, dstBucket, credentialsDir, prefix string) error {
	src, err := local.New(root).Open(srcBucket, nil)
	if err != nil {
		return err
	}
	files, err := os.ReadDir(credentialsDir)
	if err != nil {
		return err
	}
	credentials := map[string][]byte{}
	for _, f := range files {
		if credentials[f.Name()], err = os.ReadFile(filepath.Join(credentialsDir, f.Name())); err != nil {
			return err
		}
	}
	dst, err := s3.New().Open(dstBucket, credentials)
	if err != nil {
		return err
	}
	rep, err := replica.Copy(context.Background(), src, dst, prefix)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}
