package infra_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// Every ServiceAccount of housekeeper — each one a component that talks to the API server — is
// a subject of housekeeper's FlowSchema, and nothing else is.
func TestFlowSchemaNamesEveryServiceAccount(t *testing.T) {
	var accounts, subjects []string
	for _, m := range render(t, "keda") {
		switch m.obj.GetKind() {
		case "ServiceAccount":
			accounts = append(accounts, m.obj.GetNamespace()+"/"+m.obj.GetName())
		case "FlowSchema":
			if d, _, _ := unstructured.NestedString(m.obj.Object, "spec", "distinguisherMethod", "type"); d != "ByUser" {
				t.Errorf("%s: distinguisher %q, want ByUser (one flow per component)", m, d)
			}
			rules, _, _ := unstructured.NestedSlice(m.obj.Object, "spec", "rules")
			for _, r := range rules {
				ss, _, _ := unstructured.NestedSlice(r.(map[string]any), "subjects")
				for _, s := range ss {
					sa, _, _ := unstructured.NestedStringMap(s.(map[string]any), "serviceAccount")
					subjects = append(subjects, sa["namespace"]+"/"+sa["name"])
				}
			}
		}
	}
	slices.Sort(accounts)
	slices.Sort(subjects)
	if len(accounts) == 0 || !slices.Equal(accounts, subjects) {
		t.Errorf("FlowSchema subjects %v, ServiceAccounts %v", subjects, accounts)
	}
}

// The API server takes the FlowSchema and the priority level for real and classifies every
// request of housekeeper's ServiceAccounts (impersonated) into them, as its response headers
// say; a ServiceAccount of the same name in another namespace stays where it was.
func TestFlowSchemaOnAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	uids := map[string]string{} // kind → uid
	var accounts []string
	for _, m := range render(t, "keda") {
		switch m.obj.GetKind() {
		case "ServiceAccount":
			accounts = append(accounts, "system:serviceaccount:"+m.obj.GetNamespace()+":"+m.obj.GetName())
		case "FlowSchema", "PriorityLevelConfiguration":
			obj := m.obj.DeepCopy()
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, got); err != nil {
				t.Fatal(err)
			}
			uids[obj.GetKind()] = string(got.GetUID())
		}
	}
	if len(uids) != 2 || len(accounts) == 0 {
		t.Fatalf("base renders %v and ServiceAccounts %v", slices.Sorted(maps.Keys(uids)), accounts)
	}

	// classify is where the API server put a request of user (the headers are set before
	// authorization, so a Forbidden answer is classified too).
	classify := func(user string) (flowSchema, priorityLevel string, err error) {
		cfg := rest.CopyConfig(env.Kube.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return "", "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/api/v1/namespaces/"+namespace+"/secrets", nil)
		if err != nil {
			return "", "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		resp.Body.Close()
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID), nil
	}
	// The API server loads new schemas asynchronously.
	for _, user := range accounts {
		var last string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			fs, pl, err := classify(user)
			if err != nil {
				t.Fatal(err)
			}
			if fs == uids["FlowSchema"] && pl == uids["PriorityLevelConfiguration"] {
				break
			}
			last = fmt.Sprintf("flow schema %q, priority level %q", fs, pl)
			if time.Now().After(deadline) {
				t.Fatalf("%s: classified into %s, want housekeeper's (flow schema %s, priority level %s)", user, last, uids["FlowSchema"], uids["PriorityLevelConfiguration"])
			}
		}
	}
	fs, pl, err := classify("system:serviceaccount:elsewhere:housekeeper-bucket")
	if err != nil {
		t.Fatal(err)
	}
	if fs == "" || fs == uids["FlowSchema"] || pl == uids["PriorityLevelConfiguration"] {
		t.Errorf("another namespace's ServiceAccount classified into flow schema %q, priority level %q", fs, pl)
	}
}
