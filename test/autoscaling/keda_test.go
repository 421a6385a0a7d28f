// Package autoscaling has KEDA's own nats-jetstream scaler (test/keda, built from the KEDA
// module) judge the ScaledObjects housekeeper's chart renders, against the real stack: the
// metadata must name a stream, consumer, account and endpoint KEDA can read, at rest nothing
// runs, an event or a fired purge wakes its function from zero before any of its pods ran, and
// the lag returns to zero once the function has run. On one nats-server and on a cluster of
// three whose consumers are led by a node other than the one KEDA is pointed at.
package autoscaling

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// reading is what KEDA's scaler said of one trigger.
type reading = stack.KEDAReading

func TestKEDAScalesTheFunctionsFromZero(t *testing.T) {
	t.Run("one nats-server", func(t *testing.T) {
		p := pipeline.Start(t)
		scaleFromZero(t, p, strings.TrimPrefix(p.Env.NATS.MonitorURL, "http://"))
	})
	t.Run("three nats-servers", func(t *testing.T) {
		p := pipeline.Start(t, testenv.WithNATSCluster(3))
		cluster := p.Env.NATSCluster
		// KEDA is pointed at n1; every consumer is led by another node, so the scaler must find
		// the leader through the cluster, as it does behind a headless service.
		moveConsumerLeaders(t, p, "n2")
		scaleFromZero(t, p, cluster.MonitorEndpoint)
	})
}

// scaleFromZero walks the life of the functions' lag on p, KEDA reading NATS at monitor.
func scaleFromZero(t *testing.T, p *pipeline.Pipeline, monitor string) {
	k := newKEDA(t, monitor)
	k.await(t, "every function at rest", nil)
	consumers := consumerNames(t, p)
	if got := k.consumers(); !slices.Equal(got, consumers) {
		t.Fatalf("ScaledObjects scale consumers %v; setup created %v: each function needs one", got, consumers)
	}

	// An event wakes its function from zero: no function runs yet.
	createBucket(t, p)
	k.await(t, "the bucket function woken by the bucket's event", map[string]bool{"bucket": true})

	providers := objectstore.NewRegistry(azure.New())
	p.RunFunction(bucket.Definition, providers)
	waitState(t, p, &extensionsv1alpha1.BackupBucket{}, bucketName, gardencorev1beta1.LastOperationStateSucceeded)
	k.await(t, "every function at rest after the bucket function ran", nil)

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

	// A scheduled purge is not lag: the purge function stays at zero until it comes due.
	if err := p.Client.Delete(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	live := &extensionsv1alpha1.BackupEntry{}
	waitState(t, p, live, e.Name, gardencorev1beta1.LastOperationStatePending)
	due := live.DeletionTimestamp.Add(15 * time.Second)
	k.await(t, "every function at rest while the purge is scheduled", nil)
	if time.Now().After(due) {
		t.Fatalf("the purge came due (%s) before the check that it was not yet lag", due.Format(time.RFC3339))
	}
	k.await(t, "the purge function woken by the purge coming due", map[string]bool{"purge": true})
	if time.Now().Before(due) {
		t.Errorf("the purge function was woken before the purge was due (%s)", due.Format(time.RFC3339))
	}

	p.RunFunction(entry.PurgeDefinition, providers)
	k.await(t, "every function at rest after the purge ran", nil)
}

// keda runs test/keda on ScaledObjects rendered by the chart.
type keda struct {
	bin, file string
	objects   []byte
}

// newKEDA renders the chart in keda mode with monitor as NATS's monitoring endpoint and keeps
// its ScaledObjects for the scaler.
func newKEDA(t *testing.T, monitor string) *keda {
	t.Helper()
	bin, err := stack.KEDAScalerBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render("housekeeper", map[string]any{
		"cluster": pipeline.Cluster, "types": []any{"azure"}, "mode": "keda",
		"nats": map[string]any{"monitoringEndpoint": monitor},
	}, kubernetesVersion(t))
	if err != nil {
		t.Fatal(err)
	}
	var objects bytes.Buffer
	for _, doc := range strings.Split(string(r.Manifest()), "\n---") {
		if strings.Contains(doc, "\nkind: ScaledObject") {
			objects.WriteString(doc + "\n---")
		}
	}
	k := &keda{bin: bin, file: filepath.Join(t.TempDir(), "scaledobjects.yaml"), objects: objects.Bytes()}
	if err := os.WriteFile(k.file, k.objects, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// read asks KEDA's scaler about every trigger once.
func (k *keda) read(t *testing.T) []reading {
	t.Helper()
	readings, err := stack.ReadKEDA(k.bin, k.file)
	if err != nil {
		t.Fatal(err)
	}
	return readings
}

// consumers are the consumers the ScaledObjects name, sorted.
func (k *keda) consumers() []string {
	var names []string
	for _, line := range strings.Split(string(k.objects), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "consumer: "); ok {
			names = append(names, strings.Trim(v, `"`))
		}
	}
	sort.Strings(names)
	return names
}

// await polls the scaler until exactly the functions in active are active with lag, every
// other one inactive with lag 0, and no trigger fails.
func (k *keda) await(t *testing.T, what string, active map[string]bool) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what, func() (bool, string) {
		readings := k.read(t)
		ok := len(readings) > 0
		var state []string
		for _, r := range readings {
			state = append(state, r.String())
			want := active[r.Consumer]
			if r.Error != "" || r.Active != want || (r.Lag > 0) != want {
				ok = false
			}
		}
		return ok, strings.Join(state, "; ")
	})
	t.Logf("%s: KEDA reads it", what)
}

func TestKEDAFailsOnAWrongManifest(t *testing.T) {
	p := pipeline.Start(t)
	monitor := strings.TrimPrefix(p.Env.NATS.MonitorURL, "http://")
	k := newKEDA(t, monitor)
	for _, tc := range []struct{ name, from, to, want string }{
		{"consumer", "consumer: entry\n", "consumer: entries\n", `consumer "entries" not found`},
		{"stream", "stream: HOUSEKEEPER\n", "stream: HOUSEKEEPER_DEADLETTER\n", `consumer "bucket" not found in stream "HOUSEKEEPER_DEADLETTER"`},
		// KEDA finds no stream in another account and names the consumer.
		{"account", `account: "$G"`, `account: "HOUSEKEEPER"`, `consumer "bucket" not found`},
		{"endpoint", "natsServerMonitoringEndpoint: " + monitor, "natsServerMonitoringEndpoint: 127.0.0.1:1", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(k.objects, []byte(tc.from)) {
				t.Fatalf("the rendered ScaledObjects hold no %q to make wrong", tc.from)
			}
			wrong := &keda{bin: k.bin, file: filepath.Join(t.TempDir(), "wrong.yaml"), objects: bytes.Replace(k.objects, []byte(tc.from), []byte(tc.to), 1)}
			if err := os.WriteFile(wrong.file, wrong.objects, 0o644); err != nil {
				t.Fatal(err)
			}
			var failed []reading
			for _, r := range wrong.read(t) {
				if r.Error != "" {
					failed = append(failed, r)
				}
			}
			if len(failed) != 1 || !strings.Contains(failed[0].Error, tc.want) {
				t.Fatalf("a wrong %s (%s): KEDA's failures %v, want one saying %q", tc.name, tc.to, failed, tc.want)
			}
			t.Logf("a wrong %s: %s", tc.name, failed[0])
		})
	}
}

const bucketName = "seed-backups"

// createBucket creates an Azure BackupBucket on Azurite with its seed credentials.
func createBucket(t *testing.T, p *pipeline.Pipeline) {
	t.Helper()
	create(t, p, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(t, p, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "seed-credentials", Namespace: "garden"}, Data: map[string][]byte{
		azure.KeyStorageAccount: []byte(stack.AzuriteAccount),
		azure.KeyStorageKey:     []byte(stack.AzuriteKey),
		azure.KeyEndpoint:       []byte(p.Env.Azurite.Endpoint),
	}})
	create(t, p, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, Region: "westeurope",
			SecretRef: corev1.SecretReference{Name: "seed-credentials", Namespace: "garden"},
		},
	})
}

func create(t *testing.T, p *pipeline.Pipeline, obj client.Object) {
	t.Helper()
	if err := p.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func waitState(t *testing.T, p *pipeline.Pipeline, obj extensionsv1alpha1.Object, name string, state gardencorev1beta1.LastOperationState) {
	t.Helper()
	p.Eventually(60*time.Second, fmt.Sprintf("%s %s", name, state), func() (bool, string) {
		if err := p.Client.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
			return false, err.Error()
		}
		op := obj.GetExtensionStatus().GetLastOperation()
		if op == nil {
			return false, "no lastOperation"
		}
		return op.State == state, fmt.Sprintf("%s/%s %q", op.Type, op.State, op.Description)
	})
}

// consumerNames are the durable consumers setup created on the HOUSEKEEPER stream, sorted.
func consumerNames(t *testing.T, p *pipeline.Pipeline) []string {
	t.Helper()
	stream, err := p.JS.Stream(context.Background(), events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	lister := stream.ConsumerNames(context.Background())
	for name := range lister.Name() {
		names = append(names, name)
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// moveConsumerLeaders has node lead every consumer of the HOUSEKEEPER stream (a step-down with
// a preferred placement), and checks it does.
func moveConsumerLeaders(t *testing.T, p *pipeline.Pipeline, node string) {
	t.Helper()
	for _, name := range consumerNames(t, p) {
		p.Eventually(60*time.Second, "consumer "+name+" led by "+node, func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := p.JS.Consumer(ctx, events.RecordStream, name)
			if err != nil {
				return false, err.Error()
			}
			info := c.CachedInfo()
			if info.Cluster != nil && info.Cluster.Leader == node {
				return true, ""
			}
			req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, node)
			if _, err := p.NC.RequestWithContext(ctx, fmt.Sprintf("$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s", events.RecordStream, name), []byte(req)); err != nil {
				return false, err.Error()
			}
			return false, fmt.Sprintf("led by %v, stepped down", leaderOf(info))
		})
	}
}

func leaderOf(info *jetstream.ConsumerInfo) string {
	if info.Cluster == nil {
		return "nobody"
	}
	return info.Cluster.Leader
}

// kubernetesVersion is the version the chart is rendered for (scripts/versions.env).
func kubernetesVersion(t *testing.T) string {
	t.Helper()
	v, err := stack.Versions()
	if err != nil {
		t.Fatal(err)
	}
	return v["KUBERNETES_VERSION"]
}
