package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/functions/kube"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

type fixture struct {
	t      *testing.T
	url    string
	nc     *nats.Conn
	js     jetstream.JetStream
	server *stack.NATS
}

func newFixture(t *testing.T) *fixture {
	env := testenv.Start(t, testenv.WithNATS())
	nc, js := env.Connect(t)
	f := &fixture{t: t, url: env.NATS.URL, nc: nc, js: js, server: env.NATS}
	if code, _, errOut := f.cli("setup", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	return f
}

// cli runs the command line and returns its exit code, stdout and stderr.
func (f *fixture) cli(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), append([]string{"--nats-url", f.url}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func (f *fixture) publish(name string) uint64 {
	return f.publishRef(events.Ref{Kind: events.KindBackupBucket, Name: name, UID: "uid-" + name, ResourceVersion: "1"})
}

func (f *fixture) publishRef(ref events.Ref) uint64 {
	e, err := events.NewObjectEvent("test", events.OpCreated, ref, []byte(`{"kind":"BackupBucket"}`))
	if err != nil {
		f.t.Fatal(err)
	}
	msg, _ := events.Encode(e)
	ack, err := f.js.PublishMsg(context.Background(), msg)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// runFunction runs a worker whose handler fails permanently for names in failing.
func (f *fixture) runFunction(name string, failing *sync.Map, handled chan<- string) {
	fn := runner.Function{Name: name, Types: []string{events.TypeBucketCreated}, Handler: runner.HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		if _, bad := failing.Load(e.Subject()); bad {
			return runner.Permanentf("secret of %s lacks storageKey", e.Subject())
		}
		handled <- name + ":" + e.Subject()
		return nil
	})}
	// A test function: the setup knows only the real ones.
	if _, err := runner.EnsureConsumer(context.Background(), f.js, fn, runner.DefaultConsumerSettings()); err != nil {
		f.t.Fatal(err)
	}
	w, err := runner.NewWorker(f.js, fn, prometheus.NewRegistry(), runner.WithLogger(zaptest.NewLogger(f.t)))
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

func expect(t *testing.T, handled <-chan string, want ...string) {
	t.Helper()
	got := map[string]int{}
	for range want {
		select {
		case h := <-handled:
			got[h]++
		case <-time.After(10 * time.Second):
			t.Fatalf("handled %v, still waiting for %v", got, want)
		}
	}
	for _, w := range want {
		if got[w] == 0 {
			t.Errorf("handled %v, want %v", got, want)
		}
		got[w]--
	}
	select {
	case h := <-handled:
		t.Errorf("also handled %s", h)
	case <-time.After(500 * time.Millisecond):
	}
}

func TestReplayCommandRedeliversTheWindowToOneFunction(t *testing.T) {
	f := newFixture(t)
	handled := make(chan string, 100)
	var none sync.Map
	f.runFunction("alpha", &none, handled)
	f.runFunction("beta", &none, handled)
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, f.publish(fmt.Sprintf("b%d", i)))
	}
	expect(t, handled, "alpha:b0", "alpha:b1", "alpha:b2", "alpha:b3", "alpha:b4", "beta:b0", "beta:b1", "beta:b2", "beta:b3", "beta:b4")

	code, out, errOut := f.cli("replay", "--function", "alpha", "--from-seq", fmt.Sprint(seqs[1]), "--until-seq", fmt.Sprint(seqs[2]))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("re-drove 2 events (sequences %d..%d) to alpha", seqs[1], seqs[2])) {
		t.Fatalf("replay: exit %d, out %q, err %q", code, out, errOut)
	}
	expect(t, handled, "alpha:b1", "alpha:b2")

	code, _, errOut = f.cli("replay", "--function", "gamma", "--since", "1h")
	if code != 1 || !strings.Contains(errOut, `function "gamma" has no consumer`) {
		t.Errorf("replay to an unknown function: exit %d, err %q", code, errOut)
	}
	if code, _, errOut := f.cli("replay", "--function", "alpha"); code != 2 || !strings.Contains(errOut, "one of --since or --from-seq") {
		t.Errorf("replay without a start: exit %d, err %q", code, errOut)
	}
}

func TestDeadLettersListAndRetry(t *testing.T) {
	f := newFixture(t)
	handled := make(chan string, 100)
	var failing sync.Map
	failing.Store("broken", true)
	f.runFunction("alpha", &failing, handled)
	f.publish("fine")
	f.publish("broken")
	expect(t, handled, "alpha:fine")

	var out string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out, "1 dead letters") && time.Now().Before(deadline) {
		_, out, _ = f.cli("deadletters", "list")
		time.Sleep(100 * time.Millisecond)
	}
	if !regexp.MustCompile(`alpha .*` + regexp.QuoteMeta(events.TypeBucketCreated) + `.*secret of broken lacks storageKey`).MatchString(out) {
		t.Fatalf("deadletters list:\n%s", out)
	}
	var seq string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "secret of broken") {
			seq = strings.Fields(line)[0]
		}
	}

	failing.Delete("broken")
	code, out, errOut := f.cli("deadletters", "retry", "--seq", seq)
	if code != 0 || !strings.Contains(out, "1 dead letters re-driven, 0 failed") {
		t.Fatalf("retry: exit %d, out %q, err %q", code, out, errOut)
	}
	expect(t, handled, "alpha:broken")
	if _, out, _ := f.cli("deadletters", "list"); !strings.Contains(out, "0 dead letters") {
		t.Errorf("after retry:\n%s", out)
	}
	if code, out, _ := f.cli("deadletters", "retry", "--seq", "999"); code != 1 || !strings.Contains(out, "999: no such dead letter") {
		t.Errorf("retry of a missing dead letter: exit %d, out %q", code, out)
	}
}

// resync asks whoever leads the bridge; here a stand-in answers as the bridge does (the bridge's
// own answer is tested in package bridge).
func TestResyncCommandPrintsWhatTheBridgeQueued(t *testing.T) {
	f := newFixture(t)
	if code, _, errOut := f.cli("resync"); code != 1 || !strings.Contains(errOut, "no bridge answered") {
		t.Errorf("resync without a bridge: exit %d, err %q", code, errOut)
	}
	sub, err := f.nc.Subscribe(events.SubjectResync, func(m *nats.Msg) {
		data, _ := json.Marshal(events.ResyncReply{Queued: 42})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The CLI asks over a connection of its own: the subscription must have reached the server.
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := f.cli("resync"); code != 0 || !strings.Contains(out, "queued 42 objects") {
		t.Errorf("resync: exit %d, out %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("exit %d, err %q", code, errOut.String())
	}
}

// forward delivers a function's events from JetStream to the function served over HTTP, and
// dead-letters what it refuses, with its reason.
func TestForwardDeliversToAnHTTPModeFunction(t *testing.T) {
	f := newFixture(t)
	handled := make(chan string, 10)
	fn := runner.Function{Name: "bucket", Types: []string{events.TypeBucketCreated}, Handler: runner.HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		if e.Subject() == "refused" {
			return runner.Permanentf("bucket name %s is refused", e.Subject())
		}
		handled <- e.Subject()
		return nil
	})}
	h, err := runner.HTTPHandler(fn, prometheus.NewRegistry(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	paths := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	// One forwarder serves several functions, each at its URL; several need the placeholder.
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--nats-url", f.url, "forward", "--function", "bucket,entry", "--url", srv.URL}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "{function}") {
		t.Errorf("forward of two functions to one URL: exit %d, %q; want a usage error naming {function}", code, errOut.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		var out, errOut bytes.Buffer
		done <- Main(ctx, []string{"--nats-url", f.url, "forward", "--function", "bucket,entry", "--url", srv.URL + "/fn/{function}", "--addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errOut)
	}()
	f.publish("delivered")
	f.publish("refused")
	select {
	case name := <-handled:
		if name != "delivered" {
			t.Errorf("handled %s", name)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the event never reached the HTTP function")
	}
	if path := <-paths; path != "/fn/bucket" {
		t.Errorf("the bucket's event was posted to %s, want /fn/bucket", path)
	}
	var listed string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(listed, "1 dead letters") && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, listed, _ = f.cli("deadletters", "list", "--function", "bucket")
	}
	if !strings.Contains(listed, "bucket name refused is refused") {
		t.Errorf("dead letters:\n%s", listed)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("forward exited %d", code)
	}
}

// A dead letter resolves when its object converges after the failure or is gone: the list says
// so beside the object's state now, `discard --resolved` removes exactly those, and a retry of
// one whose object is gone is refused instead of replaying the old error.
func TestDeadLettersResolveWithTheirObject(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS(), testenv.WithKube())
	nc, js := env.Connect(t)
	f := &fixture{t: t, url: env.NATS.URL, nc: nc, js: js}
	if code, _, errOut := f.cli("setup", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Kube.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	c := env.Client(t)
	ctx := context.Background()
	buckets := map[string]*extensionsv1alpha1.BackupBucket{}
	for _, name := range []string{"healed", "stuck", "vanished"} {
		b := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", SecretRef: corev1.SecretReference{Name: "s", Namespace: "garden"}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		buckets[name] = b
	}
	handled := make(chan string, 10)
	var failing sync.Map
	for name, b := range buckets {
		failing.Store(name, true)
		f.publishRef(kube.Ref(events.KindBackupBucket, b))
	}
	f.runFunction("alpha", &failing, handled)
	var out string
	testenv.Eventually(t, 10*time.Second, "three dead letters", func() (bool, string) {
		_, out, _ = f.cli("deadletters", "list")
		return strings.Contains(out, "3 dead letters"), out
	})
	if !strings.Contains(out, "objects' states unknown") {
		t.Errorf("without a kubeconfig the list does not say the states are unknown:\n%s", out)
	}

	setLast := func(b *extensionsv1alpha1.BackupBucket, state gardencorev1beta1.LastOperationState, lastError string) {
		b.Status.LastOperation = &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeReconcile, State: state,
			Progress: 100, Description: "x", LastUpdateTime: metav1.Now()}
		if lastError != "" {
			b.Status.LastError = &gardencorev1beta1.LastError{Description: lastError}
		}
		if err := c.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	setLast(buckets["healed"], gardencorev1beta1.LastOperationStateSucceeded, "")
	setLast(buckets["stuck"], gardencorev1beta1.LastOperationStateError, "container not found")
	if err := c.Delete(ctx, buckets["vanished"]); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := f.cli("deadletters", "list", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "3 dead letters, 2 resolved") {
		t.Fatalf("list: exit %d, err %q:\n%s", code, errOut, out)
	}
	seqOf := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		for name := range buckets {
			if strings.Contains(line, "BackupBucket "+name+" ") {
				seqOf[name] = strings.Fields(line)[0]
				want := map[string]string{"healed": "RESOLVED: Reconcile Succeeded", "stuck": "Reconcile Error: container not found", "vanished": "RESOLVED: gone"}[name]
				if !strings.Contains(line, want) {
					t.Errorf("the dead letter of %s: %q, want %q", name, line, want)
				}
			}
		}
	}
	if len(seqOf) != 3 {
		t.Fatalf("the list does not name the three buckets:\n%s", out)
	}

	code, out, _ = f.cli("deadletters", "retry", "--seq", seqOf["vanished"], "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(out, "is gone: retrying would replay the old error") {
		t.Errorf("retry of a gone object's dead letter: exit %d:\n%s", code, out)
	}
	code, out, errOut = f.cli("deadletters", "discard", "--resolved", "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "2 dead letters discarded, 0 failed") {
		t.Fatalf("discard --resolved: exit %d, err %q:\n%s", code, errOut, out)
	}
	_, out, _ = f.cli("deadletters", "list", "--kubeconfig", kubeconfig)
	if !strings.Contains(out, "1 dead letters, 0 resolved") || !strings.Contains(out, "BackupBucket stuck ") {
		t.Errorf("after discard --resolved, want the stuck bucket's alone:\n%s", out)
	}
	select {
	case h := <-handled:
		t.Errorf("handled %s: nothing should have been re-driven", h)
	default:
	}
}
