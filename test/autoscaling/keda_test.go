// Package autoscaling has KEDA judge the ScaledObjects housekeeper's chart renders, against
// the real stack. KEDA's own operator (test/keda/operator, operator_test.go) scales the
// chart's function Deployments on a real kube-apiserver on the lag of the consumers of a real
// nats-server: at rest every function at zero, an event or a fired purge wakes its function
// from zero before any of its pods ran, and it returns to zero a cooldown after it has run; on
// one nats-server, on a cluster of three whose consumers are led by a node other than the one
// KEDA is pointed at, and on NATS secured with housekeeper's identities. KEDA's scaler called
// as a library (test/keda, keda_test.go) names what is wrong when the metadata names a
// stream, consumer, account or endpoint it cannot read.
package autoscaling

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// reading is what KEDA's scaler said of one trigger.
type reading = stack.KEDAReading

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
		// NATS as the test runs it: open, without identities (account $G).
		"nats": map[string]any{"monitoringEndpoint": monitor, "identitiesSecret": ""},
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
