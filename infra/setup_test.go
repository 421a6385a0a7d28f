package infra_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
)

// functionTypes are the event types each function takes, from the registry.
var functionTypes = func() map[string][]string {
	types := map[string][]string{}
	for _, def := range all.Functions {
		types[def.Name] = def.Types
	}
	return types
}()

// Scale to zero needs the consumers before any function pod: the setup Job of each overlay, run
// as its container runs it — the image's entrypoint (the housekeeper binary, built here) with
// the Job's arguments and environment, its ConfigMap included — against a real nats-server,
// creates every consumer the overlay reads (each ScaledObject's stream and consumer, each
// forwarder's function) with the subjects its function takes and the ConfigMap's settings, and
// no other (without the EtcdBackupConfig feature, none for schedule, snapshot and drill). No function
// is started. Before the Job ran, the same check finds nothing. NATS is secured as the chart
// expects: TLS, and the Job connects as the identity setup from the Secret housekeeper-nats,
// which holds what `housekeeper nats-auth` issued in the chart's default form (config), mounted
// as the Job mounts it.
func TestSetupJobCreatesTheConsumersBeforeAnyFunction(t *testing.T) {
	bin := buildHousekeeper(t)
	// The gardener rendering asks for three stream replicas, which one nats-server cannot hold
	// (these tests run no JetStream cluster); otherwise its configuration is the keda rendering's.
	for overlay, functions := range map[string][]string{
		"keda": all.Names(), "knative": all.Names(), withoutEtcdBackups: all.NamesOf(all.Gardener),
	} {
		t.Run(overlay, func(t *testing.T) {
			objs := render(t, overlay)
			readers := consumersRead(t, objs)
			if got := slices.Sorted(maps.Keys(readers)); !slices.Equal(got, slices.Sorted(slices.Values(functions))) {
				t.Fatalf("the overlay reads the consumers %v, want one per function it runs %v", got, functions)
			}
			url, secret, js := startSecuredNATS(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			for name, by := range readers {
				if _, err := js.Consumer(ctx, events.RecordStream, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
					t.Fatalf("consumer %s (read by %s) before the setup Job ran: %v, want no stream", name, by, err)
				}
			}

			args, jobEnv := setupJob(t, objs)
			jobEnv["HOUSEKEEPER_NATS_URL"] = url // the one thing that differs from the cluster
			mountSecret(t, objs, secret, jobEnv)
			for run := range 2 { // a second run (the Job re-applied) changes nothing and succeeds
				cmd := exec.CommandContext(ctx, bin, args...)
				for k, v := range jobEnv {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("run %d of the setup Job's container (housekeeper %q): %v\n%s", run+1, args, err, out)
				}
			}

			maxDeliver, _ := strconv.Atoi(jobEnv["HOUSEKEEPER_MAX_DELIVER"])
			ackWait, _ := time.ParseDuration(jobEnv["HOUSEKEEPER_ACK_WAIT"])
			for name, by := range readers {
				c, err := js.Consumer(ctx, events.RecordStream, name)
				if err != nil {
					t.Errorf("consumer %s/%s (read by %s): %v", events.RecordStream, name, by, err)
					continue
				}
				info := c.CachedInfo()
				want := runner.Function{Name: name, Types: functionTypes[name]}.FilterSubjects()
				if !slices.Equal(slices.Sorted(slices.Values(info.Config.FilterSubjects)), slices.Sorted(slices.Values(want))) {
					t.Errorf("consumer %s reads %v, function %s takes %v", name, info.Config.FilterSubjects, name, want)
				}
				if info.Config.MaxDeliver != maxDeliver || info.Config.AckWait != ackWait {
					t.Errorf("consumer %s: max deliver %d, ack wait %s; the ConfigMap says %d, %s", name, info.Config.MaxDeliver, info.Config.AckWait, maxDeliver, ackWait)
				}
				if info.Delivered.Consumer != 0 || info.NumWaiting != 0 {
					t.Errorf("consumer %s has been read from: %+v", name, info.Delivered)
				}
			}
			for name := range functionTypes {
				if _, read := readers[name]; read {
					continue
				}
				if _, err := js.Consumer(ctx, events.RecordStream, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
					t.Errorf("consumer %s, of a function the overlay does not run: %v, want none", name, err)
				}
			}
			record, err := js.Stream(ctx, events.RecordStream)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strconv.Itoa(record.CachedInfo().Config.Replicas), jobEnv["HOUSEKEEPER_STREAM_REPLICAS"]; got != want {
				t.Errorf("stream %s has %s replicas, the ConfigMap says %s", events.RecordStream, got, want)
			}
		})
	}
}

// consumersRead maps every durable consumer an overlay reads to what reads it: the
// nats-jetstream trigger of each ScaledObject, and each forwarder's --function.
func consumersRead(t *testing.T, objs []manifest) map[string]string {
	t.Helper()
	readers := map[string]string{}
	for _, m := range objs {
		if m.obj.GetKind() == "ScaledObject" {
			triggers, _, _ := unstructured.NestedSlice(m.obj.Object, "spec", "triggers")
			for _, tr := range triggers {
				tr := tr.(map[string]any)
				md, _, _ := unstructured.NestedStringMap(tr, "metadata")
				if tr["type"] != "nats-jetstream" || md["stream"] != events.RecordStream {
					t.Errorf("%s: trigger %v does not read the stream %s", m, tr["type"], events.RecordStream)
					continue
				}
				readers[md["consumer"]] = m.String()
			}
		}
		for _, c := range containers(m.obj) {
			if i := slices.Index(c.Args, "--function"); len(c.Args) > 0 && c.Args[0] == "forward" && i > 0 && i+1 < len(c.Args) {
				for _, fn := range strings.Split(c.Args[i+1], ",") {
					readers[fn] = m.String()
				}
			}
		}
	}
	return readers
}

// startSecuredNATS starts nats-server with TLS and the identities `housekeeper nats-auth --form
// jwt` issues, and returns its URL, the content of the Secret housekeeper-nats the chart
// mounts (key → file) and JetStream as the operator.
func startSecuredNATS(t *testing.T) (string, map[string]string, jetstream.JetStream) {
	t.Helper()
	// The server is verified; the workloads present no client certificates.
	n, issued, err := natsauth.Start(t.TempDir(), natsconn.FormConfig, hkcli.Permissions(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	secret := map[string]string{"ca.pem": issued.CA}
	for _, p := range hkcli.Permissions() {
		secret[filepath.Base(issued.CredentialsFile(p.Identity))] = issued.CredentialsFile(p.Identity)
	}
	auth, err := issued.Options(n.URL, events.IdentityOperator).Auth(events.IdentityOperator)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(n.URL, auth...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return n.URL, secret, js
}

// mountSecret does for the setup Job's environment what the kubelet does for its pod: the items
// of Secret housekeeper-nats it mounts become files, and env's paths under the mount point
// point at them.
func mountSecret(t *testing.T, objs []manifest, secret map[string]string, env map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for _, m := range objs {
		if m.obj.GetKind() != "Job" {
			continue
		}
		for _, key := range mountedSecretKeys(m.obj, "housekeeper-nats", natsMount) {
			data, err := os.ReadFile(secret[key])
			if err != nil {
				t.Fatalf("%s mounts key %s, which the Secret does not have: %v", m, key, err)
			}
			if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, v := range env {
		if rest, ok := strings.CutPrefix(v, natsMount+"/"); ok {
			env[k] = filepath.Join(dir, rest)
		}
	}
}

// setupJob is the arguments and environment of the setup Job's one container.
func setupJob(t *testing.T, objs []manifest) ([]string, map[string]string) {
	t.Helper()
	configMaps := map[string]map[string]string{}
	var jobs []manifest
	for _, m := range objs {
		switch m.obj.GetKind() {
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(m.obj.Object, "data")
			configMaps[m.obj.GetName()] = data
		case "Job":
			jobs = append(jobs, m)
		}
	}
	if len(jobs) != 1 || len(containers(jobs[0].obj)) != 1 {
		t.Fatalf("want one Job with one container, got %d Jobs", len(jobs))
	}
	c := containers(jobs[0].obj)[0]
	// No command: the image's entrypoint, the housekeeper binary (scripts/images).
	if len(c.Command) != 0 || !slices.ContainsFunc(images.Deployables(), func(d images.Deployable) bool {
		return d.Name == "housekeeper" && d.Path == "/usr/local/bin/housekeeper"
	}) {
		t.Fatalf("%s: command %q does not run the housekeeper binary", jobs[0], c.Command)
	}
	env := map[string]string{}
	for _, cm := range c.ConfigMaps {
		maps.Copy(env, configMaps[cm])
	}
	for _, e := range c.Env {
		if e.FromField {
			t.Fatalf("%s: %s is only known in the pod", jobs[0], e.Name)
		}
		env[e.Name] = e.Value
	}
	return c.Args, env
}

// buildHousekeeper builds the housekeeper binary, with -race as the test binaries are built,
// so that the build reuses their compiled packages.
func buildHousekeeper(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := stack.BuildHousekeeper(context.Background(), "", dir, true); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "housekeeper")
}

// A Job's pod template is immutable: whatever changes the setup pod (its image, its
// configuration, its credentials) renames the Job, so an upgrade applies a new Job instead of
// failing on the old one ("field is immutable", as test/seed's upgrade showed), and nothing
// else does.
func TestSetupJobIsRenamedByWhatItRuns(t *testing.T) {
	jobName := func(change func(map[string]any)) string {
		values := map[string]any{"cluster": "seed-1", "types": []any{"azure"}}
		change(values)
		r, err := chart.Render(namespace, values, kubeVersion(t))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`name: (housekeeper-setup-[0-9a-f]{8})\n`).FindSubmatch(r.Manifest())
		if m == nil {
			t.Fatal("no setup Job rendered")
		}
		return string(m[1])
	}
	base := jobName(func(map[string]any) {})
	if again := jobName(func(map[string]any) {}); again != base {
		t.Fatalf("the same values name the Job %s and %s", base, again)
	}
	for what, change := range map[string]func(map[string]any){
		"image tag": func(v map[string]any) { v["image"] = map[string]any{"tag": "v9.9.9"} },
		"priority":  func(v map[string]any) { v["priorityClassName"] = "gardener-system-900" },
		"ack wait":  func(v map[string]any) { v["consumer"] = map[string]any{"ackWait": "45s"} },
		"credentials": func(v map[string]any) {
			v["nats"] = map[string]any{"credentials": "jwt", "account": "A" + strings.Repeat("B", 55)}
		},
		"stream replicas": func(v map[string]any) { v["stream"] = map[string]any{"replicas": 3} },
		// Its consumers: the functions it runs.
		"EtcdBackupConfig feature": func(v map[string]any) { v["etcdBackupConfig"] = map[string]any{"enabled": false} },
	} {
		if got := jobName(change); got == base {
			t.Errorf("a change of the %s keeps the setup Job's name %s: its pod template would not change", what, base)
		}
	}
	if got := jobName(func(v map[string]any) { v["bridge"] = map[string]any{"replicas": 3} }); got != base {
		t.Errorf("a change of the bridge's replicas renames the setup Job (%s, was %s): it runs again for nothing", got, base)
	}
}
