package process

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

func TestFlagsAreTheSameEverywhere(t *testing.T) {
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f Flags
	f.BindFlags(fs, "what --addr serves")
	if err := fs.Parse([]string{"--addr", "127.0.0.1:9090", "--log-level", "debug"}); err != nil {
		t.Fatal(err)
	}
	if f.Addr != "127.0.0.1:9090" || f.Log.Level != "debug" {
		t.Errorf("flags %+v", f)
	}
	if fs.Lookup("health-addr") != nil {
		t.Error("--health-addr is back: one address flag, --addr")
	}
}

func TestStart(t *testing.T) {
	ctx := context.Background()
	p, err := Start(ctx, Spec{Name: "housekeeper-test"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Log == nil || p.Metrics == nil || p.KubeConfig != nil || p.NC != nil || p.NATSReady() != nil {
		t.Errorf("a process without Kubernetes and NATS: %+v", p)
	}
	if mfs, err := p.Metrics.Gather(); err != nil || len(mfs) == 0 {
		t.Errorf("metrics without the Go and process collectors: %d, %v", len(mfs), err)
	}
	p.Close()

	if _, err := Start(ctx, Spec{Name: "x", NATS: &natsconn.Options{URL: "nats://127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), "identity") {
		t.Errorf("NATS without an identity: %v", err)
	}
	if _, err := Start(ctx, Spec{Name: "x", Kube: &kube.Options{Kubeconfig: "/nonexistent/kubeconfig"}}); err == nil {
		t.Error("a kubeconfig that does not exist started")
	}
}

func TestCPUProfileWrittenAtClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	p, err := Start(context.Background(), Spec{Name: "housekeeper-test", Flags: Flags{CPUProfile: path}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	prof, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is gzipped protobuf: at least its gzip header and a few fields.
	if len(prof) < 20 || prof[0] != 0x1f || prof[1] != 0x8b {
		t.Errorf("--cpu-profile wrote %d bytes, not a gzipped profile", len(prof))
	}
}

func TestCPUProfileUnwritableIsAnError(t *testing.T) {
	_, err := Start(context.Background(), Spec{Name: "housekeeper-test", Flags: Flags{CPUProfile: filepath.Join(t.TempDir(), "missing", "cpu.pprof")}})
	if err == nil || !strings.Contains(err.Error(), "--cpu-profile") {
		t.Errorf("Start with an unwritable --cpu-profile: %v, want an error naming the flag", err)
	}
}
