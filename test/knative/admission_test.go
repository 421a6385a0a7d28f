package knative_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"knative.dev/serving/pkg/apis/serving"
	sigsyaml "sigs.k8s.io/yaml"
)

// Knative's webhook admits every Knative Service the chart renders, in a cluster whose Knative
// Serving runs with its released ConfigMaps (config-features, config-defaults, config-autoscaler)
// and the feature flags the rendering declares: what Knative refuses is printed in its own words.
// A rendering may instead be refused by the chart itself, naming the flag Knative would need.
func TestKnativeAdmitsEveryService(t *testing.T) {
	for _, r := range renderings() {
		t.Run(r.name, func(t *testing.T) {
			out, err := render(t, r)
			if err != nil {
				if r.mayRefuse != "" && strings.Contains(err.Error(), r.mayRefuse) {
					t.Logf("the chart refuses the rendering, naming %s: %v", r.mayRefuse, err)
					return
				}
				t.Fatalf("rendering the chart: %v", err)
			}
			services := out.services()
			if len(services) == 0 {
				t.Fatal("renders no Knative Service")
			}
			flags := features(out.values)
			c := newCluster(t, flags)
			for _, svc := range services {
				a := c.admit(t, svc)
				for _, w := range a.Warnings {
					t.Logf("%s: Knative warns: %s", svc.GetName(), w)
				}
				if a.Refused != "" {
					t.Errorf("Knative Serving (config-features %s) refuses Service %s/%s:\n%s", describe(flags), svc.GetNamespace(), svc.GetName(), a.Refused)
					continue
				}
				// Knative's defaulting ran: it records who created the Service.
				stored := &unstructured.Unstructured{}
				if err := stored.UnmarshalJSON(a.Object); err != nil {
					t.Fatal(err)
				}
				if stored.GetAnnotations()[serving.CreatorAnnotation] == "" {
					t.Errorf("%s: Knative's defaulting set no %s: the harness did not default it", svc.GetName(), serving.CreatorAnnotation)
				}
			}
		})
	}
}

// The harness is Knative's webhook as configured: with its released flags it refuses a field
// behind a disabled flag, and it admits it once the flag is on.
func TestTheWebhookFollowsTheFlags(t *testing.T) {
	svc := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte(`
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: probe, namespace: default}
spec:
  template:
    spec:
      priorityClassName: high
      containers: [{image: example.com/probe}]
`), &svc.Object); err != nil {
		t.Fatal(err)
	}
	if a := newCluster(t, nil).admit(t, svc); !strings.Contains(a.Refused, "must not set the field(s): spec.template.spec.priorityClassName") {
		t.Errorf("Knative's defaults admit priorityClassName: %q", a.Refused)
	}
	if a := newCluster(t, map[string]string{"kubernetes.podspec-priorityclassname": "enabled"}).admit(t, svc); a.Refused != "" {
		t.Errorf("with kubernetes.podspec-priorityclassname enabled Knative refuses priorityClassName: %s", a.Refused)
	}
}

func describe(flags map[string]string) string {
	if len(flags) == 0 {
		return "as released"
	}
	var parts []string
	for k, v := range flags {
		parts = append(parts, k+": "+v)
	}
	return "as released, plus " + strings.Join(parts, ", ")
}
