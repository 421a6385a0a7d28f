package infra_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// natsMount is where the nats-identities component mounts each workload's identity.
const natsMount = "/etc/housekeeper/nats"

// Every workload of every rendering connects to NATS as the identity of what it runs — the
// bridge, setup, a function, or the forwarder of every function — with the credentials file of
// that identity alone mounted from the Secret, and the CA to verify NATS. The files are those
// `housekeeper nats-auth` writes in its default form (config: <identity>.nk), issued here, and
// KEDA looks for the consumers in the account they live in, the one the server's configuration
// defines: in any other KEDA finds no consumer, and no function ever scales to zero.
func TestEveryWorkloadHasItsOwnNATSIdentity(t *testing.T) {
	issued := issue(t, natsconn.FormConfig)
	for _, overlay := range renderings {
		t.Run(overlay, func(t *testing.T) {
			checkIdentities(t, render(t, overlay), issued)
		})
	}
}

// With either form of `housekeeper nats-auth`, given the chart values it prints, every
// workload mounts files it wrote, and KEDA looks for the consumers in the account its identities
// live in (checkIdentities).
func TestChartUsesTheIdentitiesNATSAuthIssues(t *testing.T) {
	for _, form := range []natsconn.Form{natsconn.FormConfig, natsconn.FormJWT} {
		t.Run(string(form), func(t *testing.T) {
			issued := issue(t, form)
			var out, errOut bytes.Buffer
			if rc := hkcli.Main(context.Background(), []string{"nats-auth", "--out", issued.Dir, "--form", string(form)}, &out, &errOut); rc != 0 {
				t.Fatalf("nats-auth: exit %d: %s", rc, errOut.String())
			}
			values := map[string]any{"cluster": "seed-1", "types": []any{"azure"}, "nats": chartValuesPrinted(t, out.String())}
			r, err := chart.Render(namespace, values, kubeVersion(t))
			if err != nil {
				t.Fatalf("rendering with the values nats-auth printed (%v): %v", values["nats"], err)
			}
			objs := decodeYAMLBytes(t, "chart ("+string(form)+")", r.Manifest())
			var ms []manifest
			for _, u := range objs {
				ms = append(ms, manifest{source: "chart (" + string(form) + ")", obj: u})
			}
			checkIdentities(t, ms, issued)
		})
	}
}

// issue has `housekeeper nats-auth` issue every identity in form.
func issue(t *testing.T, form natsconn.Form) natsconn.Issued {
	t.Helper()
	dir := t.TempDir()
	if err := natsconn.Issue(dir, form, "", hkcli.Permissions()); err != nil {
		t.Fatal(err)
	}
	return natsconn.Issued{Dir: dir, Form: form}
}

// serverAccount is the account the server's side of the issued identities defines, read from
// what nats-server is given (accounts.conf or resolver.conf), not from housekeeper's own report.
func serverAccount(t *testing.T, issued natsconn.Issued) string {
	t.Helper()
	file, pattern := "accounts.conf", regexp.MustCompile(`accounts: \{\s*(\w+): \{`)
	if issued.Form == natsconn.FormJWT {
		// The preloaded accounts: the system account and housekeeper's, which has JetStream.
		file, pattern = "resolver.conf", regexp.MustCompile(`(?m)^\s+(A[A-Z2-7]{55}): `)
	}
	conf, err := os.ReadFile(filepath.Join(issued.Dir, file))
	if err != nil {
		t.Fatal(err)
	}
	system := regexp.MustCompile(`system_account: (A[A-Z2-7]{55})`).FindSubmatch(conf)
	for _, m := range pattern.FindAllSubmatch(conf, -1) {
		if system == nil || string(m[1]) != string(system[1]) {
			return string(m[1])
		}
	}
	t.Fatalf("%s names no account of housekeeper's:\n%s", file, conf)
	return ""
}

// chartValuesPrinted parses nats-auth's "chart values: --set nats.k=v,nats.k=v" line.
func chartValuesPrinted(t *testing.T, out string) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`chart values: --set (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("nats-auth printed no chart values:\n%s", out)
	}
	nats := map[string]any{}
	for _, kv := range strings.Split(m[1], ",") {
		k, v, _ := strings.Cut(strings.TrimPrefix(kv, "nats."), "=")
		nats[k] = v
	}
	return nats
}

// checkIdentities checks that every workload of objs connects as its own identity with files
// the issued credentials hold.
func checkIdentities(t *testing.T, objs []manifest, issued natsconn.Issued) {
	t.Helper()
	identities := map[string]bool{}
	for _, p := range hkcli.Permissions() {
		identities[p.Identity] = true
	}
	credsEnv := map[natsconn.Form]string{natsconn.FormConfig: "HOUSEKEEPER_NATS_NKEY", natsconn.FormJWT: "HOUSEKEEPER_NATS_CREDS"}[issued.Form]
	seen := map[string]bool{}
	for _, m := range objs {
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
		if !identities[identity] {
			t.Errorf("%s: identity %q is not one `housekeeper nats-auth` issues", m, identity)
		}
		env := map[string]string{}
		for _, e := range cs[0].Env {
			env[e.Name] = e.Value
		}
		file := filepath.Base(issued.CredentialsFile(identity))
		if got, want := env[credsEnv], natsMount+"/"+file; got != want {
			t.Errorf("%s: %s=%q, want %q", m, credsEnv, got, want)
		}
		if got, want := env["HOUSEKEEPER_NATS_TLS_CA"], natsMount+"/ca.pem"; got != want {
			t.Errorf("%s: HOUSEKEEPER_NATS_TLS_CA=%q, want %q", m, got, want)
		}
		keys := mountedSecretKeys(m.obj, "housekeeper-nats", natsMount)
		if !slices.Equal(keys, []string{file, "ca.pem"}) {
			t.Errorf("%s: mounts %v of Secret housekeeper-nats at %s, want its own %s and ca.pem only", m, keys, natsMount, file)
		}
		if _, err := os.Stat(filepath.Join(issued.Dir, file)); err != nil {
			t.Errorf("%s: mounts %s, which `housekeeper nats-auth --form %s` does not write: %v", m, file, issued.Form, err)
		}
	}
	for _, want := range append([]string{events.IdentityBridge, events.IdentitySetup}, all.Names()...) {
		if !seen[want] {
			t.Errorf("no workload connects as %s", want)
		}
	}
	account := serverAccount(t, issued)
	for _, m := range objs {
		if m.obj.GetKind() != "ScaledObject" {
			continue
		}
		triggers, _, _ := unstructured.NestedSlice(m.obj.Object, "spec", "triggers")
		for _, tr := range triggers {
			md, _, _ := unstructured.NestedStringMap(tr.(map[string]any), "metadata")
			if md["account"] != account {
				t.Errorf("%s: KEDA reads the consumers of account %q, but the identities live in %q", m, md["account"], account)
			}
		}
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
