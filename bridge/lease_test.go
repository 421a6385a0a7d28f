package bridge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/process"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The API server taken away from the bridge alone (connections refused, open ones cut) for
// longer than its lease lasts: the bridge loses the lease and stands by for it in the same
// process, without exiting, leads again when the API server is back, and announces what changed
// meanwhile and what has work outstanding within seconds of the return.
func TestBridgeRidesOutAnAPIServerOutageWithoutExiting(t *testing.T) {
	h := newHarness(t)
	host, err := url.Parse(h.env.Kube.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := stack.NewOutageProxy(host.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Down)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	through := strings.ReplaceAll(string(h.env.Kube.Kubeconfig), "https://"+host.Host, "https://"+proxy.Addr())
	if !strings.Contains(through, proxy.Addr()) {
		t.Fatalf("the kubeconfig does not name the API server at %s", host.Host)
	}
	if err := os.WriteFile(kubeconfig, []byte(through), 0o600); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.InfoLevel)
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ready := func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	cmd := &Command{
		Kube:           kube.Options{Kubeconfig: kubeconfig, QPS: kube.DefaultQPS, Burst: kube.DefaultBurst},
		NATS:           natsconn.Options{URL: h.env.NATSURL()},
		Flags:          process.Flags{Addr: addr},
		Bridge:         Options{Cluster: cluster, Scope: testScope},
		LeaderElect:    true,
		LeaderElection: LeaderElection{Namespace: "default", Name: "housekeeper-bridge", Identity: "replica-a"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := process.Start(ctx, cmd.spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Close)
	proc.Log = zap.New(core)
	exited := make(chan error, 1)
	go func() { exited <- cmd.serve(ctx, proc) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("the bridge did not stop within 30s")
		}
	})

	before := entry("shoot--dev--before--1", "azure")
	h.create(before)
	h.eventually(30*time.Second, "the entry created before the outage announced", func() bool {
		return len(typesOf(h.stream(), string(before.UID))) > 0
	})
	announcedBefore := len(typesOf(h.stream(), string(before.UID)))
	h.eventually(10*time.Second, "ready while leading", ready)

	proxy.Down()
	down := time.Now()
	during := entry("shoot--dev--during--1", "azure")
	h.create(during)
	// Longer than the lease (15 s): it is lost and may be taken by another replica meanwhile.
	lost := false
	for time.Since(down) < 25*time.Second {
		select {
		case err := <-exited:
			t.Fatalf("the bridge exited %s into the outage: %v", time.Since(down).Round(time.Second), err)
		case <-time.After(500 * time.Millisecond):
		}
		lost = lost || logs.FilterMessage("lost the lease: standing by to lead again").Len() > 0
	}
	if ready() {
		t.Error("ready 25s into the API server's outage, standing by for a lease it cannot take")
	}
	if !lost {
		t.Fatalf("no %q within 25s of the API server's outage: the test observed no lost lease", "lost the lease: standing by to lead again")
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testenv.Eventually(t, 45*time.Second, "the entry created during the outage announced", func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("the bridge exited after the outage: %v", err)
		default:
		}
		return len(typesOf(h.stream(), string(during.UID))) > 0, fmt.Sprintf("%s since the API server came back", time.Since(back).Round(time.Second))
	})
	// The entry from before, never reconciled, has work outstanding: announced anew by the new term.
	h.eventually(10*time.Second, "the outstanding entry announced again", func() bool {
		return len(typesOf(h.stream(), string(before.UID))) > announcedBefore
	})
	took := time.Since(back)
	h.eventually(10*time.Second, "ready again after the outage", ready)
	t.Logf("announced %s after the API server came back (lease duration 15s)", took.Round(100*time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("announced %s after the API server came back, want within 30s", took.Round(time.Second))
	}
	if n := logs.FilterMessage("leading").Len(); n < 2 {
		t.Errorf("led %d times, want again after the outage", n)
	}
}
