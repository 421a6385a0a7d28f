package localstack

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// startS3 starts the S3 server the aws examples use (versitygw), its data afresh under
// <Dir>/s3 and its log in <Dir>/s3.log. stop stops it.
func startS3(o Options) (srv *stack.S3, stop func(), err error) {
	fmt.Fprintln(o.Out, "starting the S3 server (versitygw) …")
	dir := filepath.Join(o.Dir, "s3")
	if err := os.RemoveAll(dir); err != nil { // every run starts afresh
		return nil, nil, err
	}
	log, err := os.Create(filepath.Join(o.Dir, "s3.log"))
	if err != nil {
		return nil, nil, err
	}
	srv, err = stack.StartS3(dir, log)
	if err != nil {
		_ = log.Close()
		return nil, nil, err
	}
	return srv, func() { srv.Stop(); _ = log.Close() }, nil
}

// startGCS starts the GCS server the gcp examples use (fake-gcs-server, its data in memory),
// its log in <Dir>/gcs.log. stop stops it.
func startGCS(o Options) (srv *stack.GCS, stop func(), err error) {
	fmt.Fprintln(o.Out, "starting the GCS server (fake-gcs-server) …")
	log, err := os.Create(filepath.Join(o.Dir, "gcs.log"))
	if err != nil {
		return nil, nil, err
	}
	srv, err = stack.StartGCS(log)
	if err != nil {
		_ = log.Close()
		return nil, nil, err
	}
	return srv, func() { srv.Stop(); _ = log.Close() }, nil
}
