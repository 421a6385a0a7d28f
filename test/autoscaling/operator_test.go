package autoscaling

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The chart's polling interval and cooldown, shortened for the test through its values
// (functions.<name>.pollingInterval, .cooldownPeriod).
const (
	pollingInterval = 1 * time.Second
	cooldownPeriod  = 5 * time.Second
)

// KEDA's own operator (test/keda/operator, built from the KEDA module) scales the function
// Deployments of the chart's keda rendering, applied to a real kube-apiserver, on the lag of the
// consumers of a real nats-server that housekeeper's setup created: every Deployment at zero at
// rest, the one whose consumer has an event pending woken to one replica, and back to zero a
// cooldown after its function has handled it. No node runs a pod: KEDA scales through the
// Deployments' scale subresource, and the test runs the woken function in-process instead of
// the pod. With NATS open ($G, no identities) on one server and on a cluster of three, and with
// NATS secured as production runs it: the chart rendered with an identities Secret, the
// identities `housekeeper nats-auth` issues, in each credentials form (there the first part of
// the walk only: what the identities change is the account and the endpoint KEDA reads).
func TestKEDAOperatorScalesTheFunctions(t *testing.T) {
	t.Run("one nats-server", func(t *testing.T) {
		p := pipeline.Start(t)
		o := startOperator(t, p, strings.TrimPrefix(p.Env.NATS.MonitorURL, "http://"), map[string]any{"identitiesSecret": ""})
		o.walk()
	})
	t.Run("three nats-servers", func(t *testing.T) {
		p := pipeline.Start(t, testenv.WithNATSCluster(3))
		// KEDA is pointed at n1; every consumer is led by another node, so the scaler must find
		// the leader through the cluster, as it does behind a headless service.
		moveConsumerLeaders(t, p, "n2")
		o := startOperator(t, p, p.Env.NATSCluster.MonitorEndpoint, map[string]any{"identitiesSecret": ""})
		o.walk()
	})
	// Production: the chart's defaults for NATS (an identities Secret, config credentials, the
	// account left for the chart to imply) with nats-server secured as `housekeeper nats-auth
	// --form config` issues it.
	t.Run("identities, config credentials", func(t *testing.T) {
		p := pipeline.StartSecure(t, natsconn.FormConfig)
		o := startOperator(t, p, strings.TrimPrefix(p.Env.NATS.MonitorURL, "http://"), map[string]any{})
		o.wake()
	})
	// With `--form jwt` the account is a public key the operator gives the chart.
	t.Run("identities, jwt credentials", func(t *testing.T) {
		p := pipeline.StartSecure(t, natsconn.FormJWT)
		account, err := p.Auth.Account()
		if err != nil {
			t.Fatal(err)
		}
		o := startOperator(t, p, strings.TrimPrefix(p.Env.NATS.MonitorURL, "http://"), map[string]any{"credentials": "jwt", "account": account})
		o.wake()
	})
}

// wake is the first part of the walk: at rest every function is at zero and stays there, an
// event wakes its function, and only it, from zero; once the function has handled it, KEDA
// keeps it for the cooldown, then scales it to zero. It returns the object stores the function
// ran with.
func (o *operator) wake() objectstore.Registry {
	t, p := o.t, o.p
	o.await("every function at rest", nil)
	o.hold("every function staying at rest", 3*pollingInterval, nil)

	// An event wakes its function from zero, and only it.
	createBucket(t, p)
	published := o.published(events.TypeBucketCreated, bucketName)
	woken := o.await("the bucket function woken by the bucket's event", map[string]bool{"bucket": true})
	t.Logf("measured: the bucket's event published → its Deployment at 1 replica: %s (polling every %s)", woken.Sub(published).Round(time.Millisecond), pollingInterval)

	// The function runs (in-process: no node runs its pod); once it has handled the event, KEDA
	// keeps it for the cooldown, then scales it to zero.
	providers := objectstore.NewRegistry(azure.New())
	p.RunFunction(bucket.Definition, providers)
	waitState(t, p, &extensionsv1alpha1.BackupBucket{}, bucketName, gardencorev1beta1.LastOperationStateSucceeded)
	p.Drained("bucket")
	drained := time.Now()
	rest := o.await("every function at rest after the bucket function ran", nil)
	// KEDA scales in at its first poll after the last active one plus the cooldown; the last
	// active poll came at most a polling interval before the drain.
	if d := rest.Sub(drained); d < cooldownPeriod-pollingInterval-time.Second {
		t.Errorf("the bucket function was scaled to zero %s after its consumer drained: before the cooldown (%s)", d, cooldownPeriod)
	} else {
		t.Logf("measured: the bucket's consumer drained → its Deployment at 0: %s (cooldown %s)", d.Round(time.Millisecond), cooldownPeriod)
	}
	return providers
}

// walk is the life of the functions' Deployments, as the walk of the lag read by KEDA's
// scaler had it before the operator ran (see wake): at rest nothing runs, an event wakes its
// function from zero, a scheduled purge is not lag until it comes due, and every function
// returns to zero a cooldown after it has run.
func (o *operator) walk() {
	t, p := o.t, o.p
	providers := o.wake()

	p.RunFunction(entry.Definition, providers)
	e := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--keda--1", Annotations: map[string]string{entry.AnnotationRetention: "15s"}},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, BucketName: bucketName, Region: "westeurope",
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
		},
	}
	create(t, p, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--keda"}})
	create(t, p, e)
	waitState(t, p, &extensionsv1alpha1.BackupEntry{}, e.Name, gardencorev1beta1.LastOperationStateSucceeded)

	// A scheduled purge is not lag: the purge function stays at zero until it comes due, while
	// the entry function, which KEDA may have woken for the entry's events, cools down.
	if err := p.Client.Delete(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	live := &extensionsv1alpha1.BackupEntry{}
	waitState(t, p, live, e.Name, gardencorev1beta1.LastOperationStatePending)
	due := live.DeletionTimestamp.Add(15 * time.Second)
	o.restUntil("every function at rest while the purge is scheduled", due.Add(-pollingInterval))
	woken := o.await("the purge function woken by the purge coming due", map[string]bool{"purge": true})
	if woken.Before(due) {
		t.Errorf("the purge function was woken at %s, before the purge was due (%s)", woken.Format(time.RFC3339Nano), due.Format(time.RFC3339))
	}
	t.Logf("measured: the purge due → its Deployment at 1 replica: %s (polling every %s; deletionTimestamp has whole seconds)", woken.Sub(due).Round(time.Millisecond), pollingInterval)

	p.RunFunction(entry.PurgeDefinition, providers)
	p.Drained("purge")
	o.await("every function at rest after the purge ran", nil)
}

// operator is KEDA's operator scaling the chart's function Deployments on p's kube-apiserver.
type operator struct {
	t   *testing.T
	p   *pipeline.Pipeline
	log string
	// functions are the functions the ScaledObjects scale, sorted.
	functions []string
}

// namespace is the release's namespace: the Deployments' and ScaledObjects'.
const namespace = "housekeeper"

var (
	deploymentKind   = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	scaledObjectKind = metav1.TypeMeta{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject"}
)

// startOperator renders the chart in keda mode with monitor as NATS's monitoring endpoint,
// nats merged into its nats values and the test's polling interval and cooldown, applies its
// function Deployments and ScaledObjects, starts KEDA's operator and waits until it has made
// every ScaledObject Ready.
func startOperator(t *testing.T, p *pipeline.Pipeline, monitor string, nats map[string]any) *operator {
	t.Helper()
	consumers := chartFunctions(t)
	functions := map[string]any{}
	for _, fn := range consumers {
		functions[fn] = map[string]any{"pollingInterval": int(pollingInterval.Seconds()), "cooldownPeriod": int(cooldownPeriod.Seconds())}
	}
	natsValues := map[string]any{"monitoringEndpoint": monitor}
	for k, v := range nats {
		natsValues[k] = v
	}
	r, err := chart.Render(namespace, map[string]any{
		"cluster": pipeline.Cluster, "types": []any{"azure"}, "mode": "keda", "nats": natsValues, "functions": functions,
	}, kubernetesVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	o := &operator{t: t, p: p, log: filepath.Join(p.Env.LogDir, "keda-operator.log")}
	var objects []*unstructured.Unstructured
	accounts := map[string]bool{}
	for _, doc := range strings.Split(string(r.Manifest()), "\n---") {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("the chart's rendering: %v\n%s", err, doc)
		}
		if u.GetKind() != "ScaledObject" {
			continue
		}
		so := scaledObjectSpec(t, u)
		if so.PollingInterval != int(pollingInterval.Seconds()) || so.CooldownPeriod != int(cooldownPeriod.Seconds()) {
			t.Fatalf("ScaledObject %s polls every %d s and cools down for %d s: the values set %s and %s", u.GetName(), so.PollingInterval, so.CooldownPeriod, pollingInterval, cooldownPeriod)
		}
		if len(so.Triggers) != 1 || so.Triggers[0].Type != "nats-jetstream" {
			t.Fatalf("ScaledObject %s has triggers %+v, want one nats-jetstream", u.GetName(), so.Triggers)
		}
		fn := so.Triggers[0].Metadata["consumer"]
		if so.ScaleTargetRef.Name != "housekeeper-"+fn {
			t.Fatalf("ScaledObject %s scales %s, not the Deployment of its consumer %s", u.GetName(), so.ScaleTargetRef.Name, fn)
		}
		accounts[so.Triggers[0].Metadata["account"]] = true
		o.functions = append(o.functions, fn)
		objects = append(objects, u)
	}
	sort.Strings(o.functions)
	if !slices.Equal(o.functions, consumers) {
		t.Fatalf("ScaledObjects scale consumers %v; the chart's functions are %v: each function needs one", o.functions, consumers)
	}
	checkConsumers(t, p, o.functions)
	// The account KEDA reads the lag in must be the identities': say so plainly if not, then
	// let the operator show what it does.
	want := "$G"
	if p.Auth != nil {
		if want, err = p.Auth.Account(); err != nil {
			t.Fatal(err)
		}
	}
	if got := slices.Sorted(maps.Keys(accounts)); !slices.Equal(got, []string{want}) {
		t.Errorf("the chart renders account %q in the ScaledObjects' triggers, but the functions' consumers live in account %q (the identities'): KEDA will find no consumer there", got, want)
	}

	// The Deployments of those functions, as the chart renders them: with no replicas field,
	// which the API server defaults to 1; KEDA owns the count.
	doc := func(kind, name string) *unstructured.Unstructured {
		for _, d := range strings.Split(string(r.Manifest()), "\n---") {
			u := &unstructured.Unstructured{}
			if err := sigsyaml.Unmarshal([]byte(d), &u.Object); err == nil && u.GetKind() == kind && u.GetName() == name {
				return u
			}
		}
		t.Fatalf("the chart renders no %s %s", kind, name)
		return nil
	}
	for _, fn := range o.functions {
		d := doc("Deployment", "housekeeper-"+fn)
		objects = append(objects, d)
		// KEDA resolves the environment of the scale target's containers (for triggers'
		// fromEnv) and fails the ScaledObject when a ConfigMap or Secret they name is missing:
		// those the chart renders come too.
		for _, ref := range envSources(t, d) {
			if !slices.ContainsFunc(objects, func(u *unstructured.Unstructured) bool { return u.GetKind() == ref.Kind && u.GetName() == ref.Name }) {
				objects = append(objects, doc(ref.Kind, ref.Name))
			}
		}
	}

	if err := stack.InstallKEDACRDs(p.Env.Kube); err != nil {
		t.Fatal(err)
	}
	create(t, p, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	for _, u := range objects {
		if err := p.Client.Create(context.Background(), u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for fn, n := range o.replicas() {
		if n != 1 {
			t.Fatalf("the Deployment of %s was created with %d replicas, want the API server's default 1 (the chart sets none)", fn, n)
		}
	}

	logs, err := os.Create(o.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	start := time.Now()
	k, err := stack.StartKEDAOperator(p.Env.Kube, stack.KEDAOperatorOptions{Logs: logs, Namespace: namespace, LogLevel: "debug"})
	if err != nil {
		t.Fatalf("%v\n%s", err, o.errors())
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Error(err)
		}
	})
	ready := time.Now()
	go func() {
		select {
		case <-k.Exited():
			t.Errorf("keda-operator exited while the test ran\n%s", o.errors())
		case <-t.Context().Done():
		}
	}()
	p.Eventually(60*time.Second, "every ScaledObject Ready", func() (bool, string) {
		ok := true
		for _, s := range o.status() {
			ok = ok && s.ready == "True"
		}
		return ok, o.describe()
	})
	t.Logf("measured: keda-operator started → /readyz %s → every ScaledObject Ready %s", ready.Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return o
}

// chartFunctions are the functions of the chart's values, sorted.
func chartFunctions(t *testing.T) []string {
	t.Helper()
	data, err := chart.FS.ReadFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct{ Functions map[string]any }
	if err := sigsyaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(values.Functions))
}

// checkConsumers checks that setup created a durable consumer on the stream of record for each
// of functions, and no other: with consumer infos and the stream's count, which every identity
// may read (none may list consumer names).
func checkConsumers(t *testing.T, p *pipeline.Pipeline, functions []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, fn := range functions {
		if _, err := p.JS.Consumer(ctx, events.RecordStream, fn); err != nil {
			t.Fatalf("the consumer %s a ScaledObject names: %v", fn, err)
		}
	}
	stream, err := p.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := stream.CachedInfo().State.Consumers; n != len(functions) {
		t.Fatalf("the stream %s has %d consumers; the ScaledObjects scale %d functions %v: each consumer needs one", events.RecordStream, n, len(functions), functions)
	}
}

// envSource is a ConfigMap or Secret a container takes environment variables from.
type envSource struct{ Kind, Name string }

// envSources are the ConfigMaps and Secrets the containers of Deployment d take environment
// variables from (envFrom, valueFrom), as KEDA reads them.
func envSources(t *testing.T, d *unstructured.Unstructured) []envSource {
	t.Helper()
	var spec struct {
		Template struct {
			Spec corev1.PodSpec `json:"spec"`
		} `json:"template"`
	}
	data, err := json.Marshal(d.Object["spec"])
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		t.Fatalf("Deployment %s: %v", d.GetName(), err)
	}
	var out []envSource
	add := func(kind, name string) {
		if s := (envSource{kind, name}); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, c := range spec.Template.Spec.Containers {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil {
				add("ConfigMap", from.ConfigMapRef.Name)
			}
			if from.SecretRef != nil {
				add("Secret", from.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				add("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				add("Secret", e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return out
}

// scaledObject is the part of a ScaledObject's spec the test checks.
type scaledObject struct {
	ScaleTargetRef  struct{ Name string } `json:"scaleTargetRef"`
	PollingInterval int                   `json:"pollingInterval"`
	CooldownPeriod  int                   `json:"cooldownPeriod"`
	Triggers        []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
	} `json:"triggers"`
}

func scaledObjectSpec(t *testing.T, u *unstructured.Unstructured) scaledObject {
	t.Helper()
	var so scaledObject
	data, err := json.Marshal(u.Object["spec"])
	if err == nil {
		err = json.Unmarshal(data, &so)
	}
	if err != nil {
		t.Fatalf("ScaledObject %s: %v", u.GetName(), err)
	}
	return so
}

// replicas is the replica count of each function's Deployment (spec.replicas: what KEDA sets
// through the scale subresource).
func (o *operator) replicas() map[string]int64 {
	o.t.Helper()
	out := map[string]int64{}
	for _, fn := range o.functions {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(deploymentKind.APIVersion)
		u.SetKind(deploymentKind.Kind)
		if err := o.p.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "housekeeper-" + fn}, u); err != nil {
			o.t.Fatal(err)
		}
		n, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if err != nil || !found {
			o.t.Fatalf("Deployment housekeeper-%s has no spec.replicas (%v)", fn, err)
		}
		out[fn] = n
	}
	return out
}

// soStatus is what a ScaledObject's status says.
type soStatus struct {
	ready, active, fallback string
	// failing names the triggers KEDA's health check counts failures of.
	failing []string
}

func (o *operator) status() map[string]soStatus {
	o.t.Helper()
	out := map[string]soStatus{}
	for _, fn := range o.functions {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(scaledObjectKind.APIVersion)
		u.SetKind(scaledObjectKind.Kind)
		if err := o.p.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "housekeeper-" + fn}, u); err != nil {
			o.t.Fatal(err)
		}
		var s soStatus
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			status, _ := c["status"].(string)
			switch c["type"] {
			case "Ready":
				s.ready = status
			case "Active":
				s.active = status
			case "Fallback":
				s.fallback = status
			}
		}
		health, _, _ := unstructured.NestedMap(u.Object, "status", "health")
		for name, h := range health {
			h, _ := h.(map[string]any)
			if h["status"] != "Happy" {
				s.failing = append(s.failing, fmt.Sprintf("%s %v (%v failures)", name, h["status"], h["numberOfFailures"]))
			}
		}
		out[fn] = s
	}
	return out
}

// describe is the state of every function's Deployment and ScaledObject, with what KEDA's
// operator last logged as errors when a trigger fails.
func (o *operator) describe() string {
	o.t.Helper()
	replicas, status := o.replicas(), o.status()
	var b strings.Builder
	failing := false
	for _, fn := range o.functions {
		s := status[fn]
		fmt.Fprintf(&b, "%s: %d replicas, Ready=%s Active=%s Fallback=%s", fn, replicas[fn], s.ready, s.active, s.fallback)
		if len(s.failing) > 0 {
			fmt.Fprintf(&b, " failing %s", strings.Join(s.failing, ", "))
			failing = true
		}
		b.WriteString("; ")
	}
	if failing {
		b.WriteString("\n" + o.errors())
	}
	return b.String()
}

// await waits until the Deployment of each function in active has 1 replica, every other
// one 0, and every ScaledObject is Ready with the matching Active condition; it returns when
// the replica counts were first seen right.
func (o *operator) await(what string, active map[string]bool) time.Time {
	o.t.Helper()
	var reached time.Time
	o.p.Eventually(cooldownPeriod+60*time.Second, what, func() (bool, string) {
		if !o.replicasAre(active) {
			reached = time.Time{}
			return false, o.describe()
		}
		if reached.IsZero() {
			reached = time.Now()
		}
		for fn, s := range o.status() {
			want := map[bool]string{true: "True", false: "False"}[active[fn]]
			if s.ready != "True" || s.active != want {
				return false, o.describe()
			}
		}
		return true, ""
	})
	o.t.Logf("%s: %s", what, o.describe())
	return reached
}

// replicasAre says whether the functions in active have 1 replica and the others 0.
func (o *operator) replicasAre(active map[string]bool) bool {
	for fn, n := range o.replicas() {
		if want := map[bool]int64{true: 1, false: 0}[active[fn]]; n != want {
			return false
		}
	}
	return true
}

// hold checks for d that the replica counts stay as await(active) wants them.
func (o *operator) hold(what string, d time.Duration, active map[string]bool) {
	o.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !o.replicasAre(active) {
			o.t.Fatalf("%s for %s: %s", what, d, o.describe())
		}
	}
}

// restUntil checks, until deadline, that the purge function stays at zero, and that every
// function comes to rest before then.
func (o *operator) restUntil(what string, deadline time.Time) {
	o.t.Helper()
	rested := false
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if o.replicas()["purge"] != 0 {
			o.t.Fatalf("%s: the purge function was woken %s before the purge was due: %s", what, time.Until(deadline.Add(pollingInterval)).Round(time.Millisecond), o.describe())
		}
		if !rested && o.replicasAre(nil) {
			rested = true
			o.t.Logf("%s: %s", what, o.describe())
		}
	}
	if !rested {
		o.t.Fatalf("%s: not at rest before the purge was due: %s", what, o.describe())
	}
}

// published is when the stream of record received the last event of eventType about name.
func (o *operator) published(eventType, name string) time.Time {
	o.t.Helper()
	subject, err := events.Subject(eventType, name)
	if err != nil {
		o.t.Fatal(err)
	}
	var at time.Time
	o.p.Eventually(30*time.Second, "an event on "+subject, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := o.p.JS.Stream(ctx, events.RecordStream)
		if err != nil {
			return false, err.Error()
		}
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return false, err.Error()
		}
		at = msg.Time
		return true, ""
	})
	return at
}

// errors are the last distinct errors KEDA's operator logged (its log is JSON lines).
func (o *operator) errors() string {
	data, err := os.ReadFile(o.log)
	if err != nil {
		return fmt.Sprintf("keda-operator's log: %v", err)
	}
	var lines []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var entry struct {
			Level, Msg, Error, Logger string
			ScaledObject              string `json:"scaledObject.Name"`
		}
		if json.Unmarshal(scanner.Bytes(), &entry) != nil {
			if !strings.HasPrefix(scanner.Text(), "{") {
				lines = append(lines, scanner.Text()) // not zap's: a panic, a flag error
			}
			continue
		}
		if entry.Level != "error" {
			continue
		}
		line := fmt.Sprintf("%s %s: %s: %s", entry.Logger, entry.ScaledObject, entry.Msg, entry.Error)
		if i := slices.Index(lines, line); i >= 0 {
			lines = slices.Delete(lines, i, i+1)
		}
		lines = append(lines, line)
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	if len(lines) == 0 {
		return "keda-operator logged no error"
	}
	return "keda-operator's last errors:\n  " + strings.Join(lines, "\n  ")
}
