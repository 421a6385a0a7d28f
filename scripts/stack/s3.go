package stack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
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

	cmd  *exec.Cmd
	done chan struct{}
}

// S3Binary is the versitygw executable installed by scripts/install-s3.sh at the version
// pinned in scripts/versions.env.
func S3Binary() (string, error) {
	versions, err := Versions()
	if err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "s3", "versitygw-"+versions["VERSITYGW_VERSION"], "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("versitygw %w at %s: run `make tools` (scripts/install-s3.sh)", ErrNotInstalled, bin)
	}
	return bin, nil
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
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startS3(bin, dir, port, logs)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
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
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s := &S3{Endpoint: "http://" + addr, Port: port, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("versitygw exited before listening on %s (see its log)", addr)
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("versitygw did not listen on %s within 30s", addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop terminates the server and waits for it to exit; its data stays in Dir.
func (s *S3) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}
