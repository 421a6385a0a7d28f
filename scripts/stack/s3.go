package stack

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// The local S3 server's root user and region (development values; not secrets).
const (
	S3AccessKey = "housekeeper"
	S3SecretKey = "housekeeper-local-s3-secret"
	// S3Region is not us-east-1, so that bucket creation sends a location constraint.
	S3Region = "eu-local-1"
)

// S3 is a running versitygw S3 server with its posix backend: buckets are directories under
// Dir/buckets, versions of versioned buckets live under Dir/versions, and its own IAM (users
// besides the root user, who answer as on AWS: an unknown key is InvalidAccessKeyId) under
// Dir/iam.
type S3 struct {
	// Endpoint is the service URL, http://127.0.0.1:<port>; address buckets path-style.
	Endpoint string
	Port     int
	Dir      string

	proc *Process
}

// S3Binary is the versitygw executable installed by scripts/install-s3.sh at the version
// pinned in scripts/versions.env.
func S3Binary() (string, error) {
	dir, err := installed("scripts/install-s3.sh", func(v map[string]string) string {
		return filepath.Join("s3", "versitygw-"+v["VERSITYGW_VERSION"])
	}, "versitygw")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "versitygw"), nil
}

// StartS3 starts versitygw on a free loopback port, keeping its data under dir (created if
// missing) and writing its log to logs.
func StartS3(dir string, logs io.Writer) (*S3, error) {
	bin, err := S3Binary()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"buckets", "versions", "iam"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return OnFreePort(func(port int) (*S3, error) { return startS3(bin, dir, port, logs) })
}

func startS3(bin, dir string, port int, logs io.Writer) (*S3, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin,
		"--port", addr, "--region", S3Region, "--quiet", "--iam-dir", filepath.Join(dir, "iam"),
		"posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "buckets"))
	// The root user's keys go in the environment, not on the command line.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+S3AccessKey, "ROOT_SECRET_ACCESS_KEY="+S3SecretKey)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	if err := proc.AwaitListening("versitygw", addr); err != nil {
		return nil, err
	}
	return &S3{Endpoint: "http://" + addr, Port: port, Dir: dir, proc: proc}, nil
}

// Stop terminates the server and waits for it to exit; its data stays in Dir.
func (s *S3) Stop() { s.proc.Stop() }

// Client is an S3 client of the server's root user, path-style, for tests to arrange and
// inspect what housekeeper's store cannot (object lock, versions, tags); httpClient, if not
// nil, sends its requests (to count them).
func (s *S3) Client(httpClient *http.Client) *awss3.Client {
	opts := awss3.Options{
		Region: S3Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: S3AccessKey, SecretAccessKey: S3SecretKey}, nil
		}),
	}
	if httpClient != nil {
		opts.HTTPClient = httpClient
	}
	return awss3.New(opts)
}
