package knative_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	logtesting "knative.dev/pkg/logging/testing"
	"knative.dev/pkg/network"

	netapis "knative.dev/networking/pkg/apis/networking"

	"knative.dev/serving/pkg/apis/autoscaling"
	"knative.dev/serving/pkg/apis/serving"
	"knative.dev/serving/pkg/autoscaler/scaling"
	kparesources "knative.dev/serving/pkg/reconciler/autoscaling/kpa/resources"
)

// The forwarder's defaults (functions/cli/forward.go) where the chart passes no flag.
const (
	forwardDefaultTimeout     = 5 * time.Minute
	forwardDefaultConcurrency = 4
)

// forwarder is what the chart's forwarder Deployment (housekeeper-forward) is told.
type forwarder struct {
	functions   []string
	url         string
	timeout     time.Duration
	concurrency int
	labels      map[string]string
}

func forwarderOf(t *testing.T, r *rendered) forwarder {
	t.Helper()
	d := r.object("Deployment", "housekeeper-forward")
	if d == nil {
		t.Fatal("renders no Deployment housekeeper-forward")
	}
	f := forwarder{timeout: forwardDefaultTimeout, concurrency: forwardDefaultConcurrency}
	f.labels, _, _ = unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] == "forward" {
			for _, a := range c["args"].([]any) {
				args = append(args, a.(string))
			}
		}
	}
	if len(args) == 0 || args[0] != "forward" {
		t.Fatalf("housekeeper-forward's container forward runs %q, not forward", args)
	}
	for i := 1; i < len(args); i++ {
		name, value, ok := strings.Cut(args[i], "=")
		if !ok && i+1 < len(args) {
			value = args[i+1]
			i++
		}
		var err error
		switch strings.TrimLeft(name, "-") {
		case "function":
			f.functions = strings.Split(value, ",")
		case "url":
			f.url = value
		case "timeout":
			f.timeout, err = time.ParseDuration(value)
		case "concurrency":
			f.concurrency, err = strconv.Atoi(value)
		}
		if err != nil {
			t.Fatalf("housekeeper-forward: %s %s: %v", name, value, err)
		}
	}
	if len(f.functions) == 0 || f.url == "" {
		t.Fatalf("housekeeper-forward: no --function or --url in %q", args)
	}
	return f
}

// The forwarder and the Knative Services agree, as Knative's controllers and autoscaler read
// the admitted Services: the forwarder's URL of each function is its Service's cluster-local
// address; Knative runs each Revision with the chart's containerConcurrency and timeoutSeconds,
// and no longer than the forwarder waits for an answer (or the forwarder redelivers an event
// whose first delivery still runs); Knative's PodAutoscaler reads the annotations as the KPA
// class, scaling on concurrency between 0 and maxReplicas; and with the events the forwarder
// keeps in flight Knative's autoscaler can reach maxReplicas.
func TestForwarderAndServicesAgree(t *testing.T) {
	t.Setenv("CLUSTER_DOMAIN", "cluster.local") // Knative's default; not this machine's resolv.conf
	for _, r := range renderings() {
		t.Run(r.name, func(t *testing.T) {
			out, err := render(t, r)
			if err != nil {
				t.Skipf("the chart refuses the rendering (TestKnativeAdmitsEveryService judges it): %v", err)
			}
			c := newCluster(t, features(out.values))
			fwd := forwarderOf(t, out)
			asConfig := c.apis.Load().Autoscaler
			for _, fn := range fwd.functions {
				svc := out.object("Service", "housekeeper-"+fn)
				if svc == nil || svc.GetAPIVersion() != "serving.knative.dev/v1" {
					t.Errorf("the forwarder forwards %s, but no Knative Service housekeeper-%s is rendered", fn, fn)
					continue
				}
				url := strings.ReplaceAll(fwd.url, "{function}", fn)
				if want := "http://" + network.GetServiceHostname(svc.GetName(), svc.GetNamespace()) + "/"; url != want {
					t.Errorf("%s: the forwarder POSTs to %s, Knative serves the Service at %s", fn, url, want)
				}
				if v := svc.GetLabels()[netapis.VisibilityLabelKey]; v != serving.VisibilityClusterLocal {
					t.Errorf("%s: %s=%q: the Service is not %s only", fn, netapis.VisibilityLabelKey, v, serving.VisibilityClusterLocal)
				}
				a := c.admit(t, svc)
				if a.Refused != "" {
					t.Logf("%s: Knative refuses the Service (TestKnativeAdmitsEveryService reports it)", fn)
					continue
				}
				d := c.derive(t, a.Object)
				values := out.function(t, fn)
				maxReplicas, concurrency, timeout := number(values["maxReplicas"]), number(values["containerConcurrency"]), number(values["timeoutSeconds"])

				rev := d.Revision
				if got := rev.Spec.GetContainerConcurrency(); got != concurrency {
					t.Errorf("%s: Knative's Revision %s has containerConcurrency %d, the chart's value is %d", fn, rev.Name, got, concurrency)
				}
				if rev.Spec.TimeoutSeconds == nil || *rev.Spec.TimeoutSeconds != timeout {
					t.Errorf("%s: Knative's Revision %s has timeoutSeconds %v, the chart's value is %d", fn, rev.Name, rev.Spec.TimeoutSeconds, timeout)
				} else if knative := time.Duration(*rev.Spec.TimeoutSeconds) * time.Second; knative > fwd.timeout {
					t.Errorf("%s: Knative lets a request to %s run %s (timeoutSeconds), the forwarder gives up after %s (--timeout): it redelivers an event whose first delivery may still be running", fn, rev.Name, knative, fwd.timeout)
				}

				pa := d.PodAutoscaler
				if pa.Class() != autoscaling.KPA || pa.Metric() != autoscaling.Concurrency {
					t.Errorf("%s: Knative's PodAutoscaler is of class %s on %s, not the KPA on concurrency", fn, pa.Class(), pa.Metric())
				}
				lo, hi := pa.ScaleBounds(asConfig)
				if lo != 0 || int64(hi) != maxReplicas {
					t.Errorf("%s: Knative scales %s between %d and %d pods, the chart means 0 and maxReplicas %d", fn, rev.Name, lo, hi, maxReplicas)
				}

				// Knative's autoscaler, as it decides, with the forwarder's events in flight.
				decider := kparesources.MakeDecider(pa, asConfig)
				pods, excess := settle(t, rev.Namespace, rev.Name, &decider.Spec, float64(fwd.concurrency), int(hi))
				t.Logf("%s: %d events in flight (forward --concurrency) → Knative runs %d of at most %d pods (target %.1f of containerConcurrency %d per pod); excess burst capacity %d (negative: the activator stays in the request path)",
					fn, fwd.concurrency, pods, hi, decider.Spec.TargetValue, concurrency, excess)
				if pods < int(hi) {
					t.Errorf("%s: Knative never scales %s beyond %d of maxReplicas %d pods: the forwarder keeps at most %d events in flight (--concurrency), Knative's autoscaler targets %.1f per pod (containerConcurrency %d × target utilisation %.2f)",
						fn, rev.Name, pods, hi, fwd.concurrency, decider.Spec.TargetValue, concurrency, asConfig.ContainerConcurrencyTargetFraction)
				}
			}
		})
	}
}

func number(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return -1
}

// settle runs Knative's autoscaler with inFlight concurrent requests until the pods it wants are
// the pods it has (capped at maxScale, as the KPA reconciler caps them): the pods, and the excess
// burst capacity it reports then.
func settle(t *testing.T, namespace, revision string, spec *scaling.DeciderSpec, inFlight float64, maxScale int) (pods int, excess int32) {
	t.Helper()
	pods = 1
	now := time.Unix(1_000_000, 0)
	for range 10 {
		counter := &podCounter{ready: pods}
		a := scaling.New(attribute.NewSet(), noop.NewMeterProvider(), namespace, revision, constantLoad(inFlight), counter, spec)
		res := a.Scale(logtesting.TestLogger(t), now)
		if !res.ScaleValid {
			t.Fatalf("Knative's autoscaler finds no valid scale for %s", revision)
		}
		want := int(res.DesiredPodCount)
		if maxScale > 0 {
			want = min(want, maxScale)
		}
		want = max(want, 1)
		if want == pods {
			return pods, res.ExcessBurstCapacity
		}
		pods = want
		now = now.Add(time.Minute)
	}
	t.Fatalf("Knative's autoscaler does not settle for %s", revision)
	return 0, 0
}

// constantLoad is a metric client: the revision's requests in flight, stable and in panic.
type constantLoad float64

func (l constantLoad) StableAndPanicConcurrency(types.NamespacedName, time.Time) (float64, float64, error) {
	return float64(l), float64(l), nil
}

func (l constantLoad) StableAndPanicRPS(types.NamespacedName, time.Time) (float64, float64, error) {
	return 0, 0, fmt.Errorf("not scaling on rps")
}

type podCounter struct{ ready int }

func (p *podCounter) ReadyCount() (int, error)    { return p.ready, nil }
func (p *podCounter) NotReadyCount() (int, error) { return 0, nil }
