package infra_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
)

// natsMount is where the nats-identities component mounts each workload's identity.
const natsMount = "/etc/housekeeper/nats"

// Every workload of every rendering connects to NATS as the identity of what it runs — the
// bridge, setup, a function, or the forwarder of every function — with the
// credentials file of that identity alone mounted from the Secret, and the CA to verify NATS.
func TestEveryWorkloadHasItsOwnNATSIdentity(t *testing.T) {
	issued := map[string]bool{}
	for _, p := range hkcli.Permissions() {
		issued[p.Identity] = true
	}
	for _, overlay := range renderings {
		t.Run(overlay, func(t *testing.T) {
			seen := map[string]bool{}
			for _, m := range render(t, overlay) {
				cs := containers(m.obj)
				if len(cs) == 0 {
					continue
				}
				identity := identityOf(m.obj, cs[0].Args)
				if identity == "" {
					t.Errorf("%s: runs %q, which is none of housekeeper's identities", m, cs[0].Args)
					continue
				}
				seen[identity] = true
				if !issued[identity] {
					t.Errorf("%s: identity %q is not one `housekeeper nats-auth` issues", m, identity)
				}
				env := map[string]string{}
				for _, e := range cs[0].Env {
					env[e.Name] = e.Value
				}
				if got, want := env["HOUSEKEEPER_NATS_CREDS"], natsMount+"/"+identity+".creds"; got != want {
					t.Errorf("%s: HOUSEKEEPER_NATS_CREDS=%q, want %q", m, got, want)
				}
				if got, want := env["HOUSEKEEPER_NATS_TLS_CA"], natsMount+"/ca.pem"; got != want {
					t.Errorf("%s: HOUSEKEEPER_NATS_TLS_CA=%q, want %q", m, got, want)
				}
				if keys := mountedSecretKeys(m.obj, "housekeeper-nats", natsMount); !slices.Equal(keys, []string{identity + ".creds", "ca.pem"}) {
					t.Errorf("%s: mounts %v of Secret housekeeper-nats at %s, want its own %s.creds and ca.pem only", m, keys, natsMount, identity)
				}
			}
			for _, want := range append([]string{events.IdentityBridge, events.IdentitySetup}, all.Names()...) {
				if !seen[want] {
					t.Errorf("no workload connects as %s", want)
				}
			}
		})
	}
}

// identityOf is the NATS identity a workload's container connects as, from what it runs.
func identityOf(u *unstructured.Unstructured, args []string) string {
	switch {
	case len(args) == 0 && u.GetLabels()["app.kubernetes.io/component"] == "bridge":
		return events.IdentityBridge // the bridge image's entrypoint, without arguments
	case len(args) >= 1 && args[0] == "setup":
		return events.IdentitySetup
	case len(args) >= 2 && args[0] == "function":
		return args[1]
	case len(args) >= 1 && args[0] == "forward":
		return events.IdentityForward
	}
	return ""
}

// mountedSecretKeys are the keys of secret the pod of u mounts at path, in the items' order.
func mountedSecretKeys(u *unstructured.Unstructured, secret, path string) []string {
	spec := podSpecPath(u)
	volumes, _, _ := unstructured.NestedSlice(u.Object, append(spec, "volumes")...)
	cs, _, _ := unstructured.NestedSlice(u.Object, append(spec, "containers")...)
	if len(cs) == 0 {
		return nil
	}
	mounts, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
	var keys []string
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["mountPath"] != path {
			continue
		}
		for _, v := range volumes {
			v := v.(map[string]any)
			s, _, _ := unstructured.NestedMap(v, "secret")
			if v["name"] != m["name"] || s["secretName"] != secret {
				continue
			}
			items, _, _ := unstructured.NestedSlice(s, "items")
			for _, it := range items {
				keys = append(keys, strings.TrimSpace(it.(map[string]any)["key"].(string)))
			}
		}
	}
	return keys
}
