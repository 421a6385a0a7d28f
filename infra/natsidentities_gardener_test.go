package infra_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	chartutils "github.com/gardener/gardener/pkg/utils/chart"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/housekeeper-dev/housekeeper/events"
	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
)

// gardenIdentities are the identities of the "gardener" rendering: what `housekeeper nats-auth
// --tls-hosts` writes into <out>/garden, the data of the garden Secret the ControllerDeployment
// references. Issued once for the package (the renderings are cached).
var gardenIdentities = sync.OnceValues(func() (natsconn.Issued, error) {
	dir, err := os.MkdirTemp("", "housekeeper-infra-garden-identities-")
	if err != nil {
		return natsconn.Issued{}, err
	}
	var out, errOut bytes.Buffer
	if rc := hkcli.Main(context.Background(), []string{"nats-auth", "--out", dir, "--tls-hosts", "nats.nats.svc.cluster.local"}, &out, &errOut); rc != 0 {
		return natsconn.Issued{}, &exitError{errOut.String()}
	}
	return natsconn.Issued{Dir: dir, Form: natsconn.FormConfig, CA: filepath.Join(dir, "ca.pem")}, nil
})

type exitError struct{ msg string }

func (e *exitError) Error() string { return "nats-auth: " + e.msg }

// gardenSecretFromNATSAuth is the garden Secret as infra/docs/deploy.md ("NATS identities") has the operator create it from
// nats-auth's <out>/garden (kubectl create secret generic --from-file=<out>/garden, labelled).
func gardenSecretFromNATSAuth(t *testing.T, issued natsconn.Issued) *corev1.Secret {
	t.Helper()
	dir := filepath.Join(issued.Dir, natsconn.GardenSecretDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data[e.Name()] = b
	}
	return garden.NATSIdentities(data)
}

// gardenletValues are the ControllerDeployment's values as gardenlet's ControllerInstallation
// reconciler renders them before the chart: every {{ .resources.<name>.data.<key> }} substituted
// from the garden's objects by gardener's own code (chartutils.RenderHelmValues), objs standing
// for the garden namespace.
func gardenletValues(t *testing.T, objs ...client.Object) (map[string]any, error) {
	t.Helper()
	_, dep := registration(t)
	var values map[string]any
	if err := json.Unmarshal(dep.Helm.Values.Raw, &values); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	return chartutils.RenderHelmValues(context.Background(), c, values, garden.Namespace, dep.Resources)
}

// The operator gives the NATS identities once, as the garden Secret the ControllerDeployment
// references: gardenlet substitutes it into the values of every installation, and the chart
// creates the identities Secret in the installation's namespace — whichever it is, so a
// re-installation into a new extension-<installation> has them as well — with each identity's
// file as nats-auth wrote it, which every workload mounts (its own only). Without the label
// gardener requires of a referenced Secret, or without a key, gardenlet renders nothing.
func TestRegistrationGivesEveryInstallationItsIdentities(t *testing.T) {
	issued, err := gardenIdentities()
	if err != nil {
		t.Fatal(err)
	}
	secret := gardenSecretFromNATSAuth(t, issued)
	values, err := gardenletValues(t, secret)
	if err != nil {
		t.Fatalf("gardenlet's substitution of the garden Secret made by nats-auth's <out>/garden: %v", err)
	}
	values["gardener"] = map[string]any{"seed": map[string]any{"name": gardenerSeed}}
	for _, ns := range []string{"extension-housekeeper-3c7a1", "extension-housekeeper-9xq4m"} {
		r, err := chart.Render(ns, values, kubeVersion(t))
		if err != nil {
			t.Fatalf("rendering into %s: %v", ns, err)
		}
		var objs []manifest
		var rendered *unstructured.Unstructured
		for _, u := range decodeYAMLBytes(t, ns, r.Manifest()) {
			objs = append(objs, manifest{source: ns, obj: u})
			if u.GetKind() == "Secret" && u.GetName() == "housekeeper-nats" {
				rendered = u
			}
		}
		if rendered == nil {
			t.Fatalf("%s: the chart rendered no Secret housekeeper-nats from the ControllerDeployment's identities", ns)
		}
		if rendered.GetNamespace() != ns {
			t.Errorf("the identities Secret is rendered into %q, the installation's namespace is %s", rendered.GetNamespace(), ns)
		}
		data, _, _ := unstructured.NestedStringMap(rendered.Object, "data")
		want := map[string]string{"ca.pem": issued.CA}
		for _, id := range hkcli.WorkloadIdentities() {
			if id != events.IdentityForward { // keda mode: no forwarder
				want[filepath.Base(issued.CredentialsFile(id))] = issued.CredentialsFile(id)
			}
		}
		for key, file := range want {
			b, _ := os.ReadFile(file)
			if got := decodeB64(t, data[key]); got != string(b) {
				t.Errorf("%s: Secret housekeeper-nats %s is %q, nats-auth wrote %q into %s", ns, key, got, b, file)
			}
		}
		if len(data) != len(want) {
			t.Errorf("%s: Secret housekeeper-nats holds %d keys, want %d (the workloads' identities and ca.pem; never operator)", ns, len(data), len(want))
		}
		checkIdentities(t, objs, issued)
	}

	unlabelled := secret.DeepCopy()
	unlabelled.Labels = nil
	if _, err := gardenletValues(t, unlabelled); err == nil || !strings.Contains(err.Error(), "resource-reference") {
		t.Errorf("the garden Secret without gardener.cloud/role=resource-reference: %v, want gardenlet's refusal", err)
	}
	partial := secret.DeepCopy()
	delete(partial.Data, "purge")
	if _, err := gardenletValues(t, partial); err == nil || !strings.Contains(err.Error(), "purge") {
		t.Errorf("the garden Secret without purge: %v, want gardenlet's error naming the key", err)
	}
}

// The chart creates the identities Secret only when it is complete: each identity its workloads
// connect as, and the CA; never the operator's identity (which re-drives); and only with a name.
func TestChartRefusesIncompleteIdentities(t *testing.T) {
	full := map[string]any{"ca": "PEM"}
	for _, id := range hkcli.WorkloadIdentities() {
		full[id] = "SU" + strings.ToUpper(id)
	}
	without := func(key string) map[string]any {
		m := map[string]any{}
		for k, v := range full {
			if k != key {
				m[k] = v
			}
		}
		return m
	}
	base := func(nats map[string]any) map[string]any {
		return map[string]any{"cluster": "seed-1", "types": []any{"azure"}, "nats": nats}
	}
	for _, c := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no bridge", base(map[string]any{"identities": without("bridge")}), "nats.identities.bridge is required"},
		{"no purge", base(map[string]any{"identities": without("purge")}), "nats.identities.purge is required"},
		{"no ca", base(map[string]any{"identities": without("ca")}), "nats.identities.ca is required"},
		{"no forward in knative mode", func() map[string]any {
			v := base(map[string]any{"identities": without("forward")})
			v["mode"] = "knative"
			return v
		}(), "nats.identities.forward is required"},
		{"the operator's identity", base(map[string]any{"identities": func() map[string]any { m := without(""); m["operator"] = "SU"; return m }()}), "operator"},
		{"no Secret name", base(map[string]any{"identities": full, "identitiesSecret": ""}), "nats.identities without nats.identitiesSecret"},
	} {
		if _, err := chart.Render(namespace, c.values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	// keda mode needs no forwarder's identity.
	if _, err := chart.Render(namespace, base(map[string]any{"identities": without("forward")}), kubeVersion(t)); err != nil {
		t.Errorf("keda mode without the forwarder's identity: %v", err)
	}
}

// A rotation — the garden Secret's identities replaced — changes every pod template that
// connects to NATS (the checksum of the identities), so the pods restart with the new ones;
// the workloads read their credentials once, at start. Identities created by hand (no
// nats.identities) leave the templates alone.
func TestRotatedIdentitiesRollThePods(t *testing.T) {
	podChecksums := func(ids map[string]any) map[string]string {
		nats := map[string]any{}
		if ids != nil {
			nats["identities"] = ids
		}
		r, err := chart.Render(namespace, map[string]any{"cluster": "seed-1", "types": []any{"azure"}, "nats": nats}, kubeVersion(t))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, u := range decodeYAMLBytes(t, "chart", r.Manifest()) {
			if u.GetKind() != "Deployment" {
				continue
			}
			ann, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
			out[u.GetName()] = ann["checksum/nats-identities"]
		}
		return out
	}
	ids := func(generation string) map[string]any {
		m := map[string]any{"ca": "PEM"}
		for _, id := range hkcli.WorkloadIdentities() {
			m[id] = "SU" + strings.ToUpper(id) + generation
		}
		return m
	}
	before, after, byHand := podChecksums(ids("1")), podChecksums(ids("2")), podChecksums(nil)
	for name, sum := range before {
		if sum == "" || sum == after[name] {
			t.Errorf("%s: checksum/nats-identities %q before the rotation, %q after: the pods would keep the old identities", name, sum, after[name])
		}
		if byHand[name] != "" {
			t.Errorf("%s: checksum/nats-identities %q without nats.identities", name, byHand[name])
		}
	}
	if len(before) < 2 {
		t.Errorf("only %d Deployments rendered", len(before))
	}
}

// nats-auth --previous (config form) writes the servers' configuration of a rotation: the new
// and the previous identities accepted at once. A real nats-server taking it (a reload, as on
// SIGHUP) keeps the connections of the previous credentials and accepts the new ones; taking
// the new accounts.conf then, it accepts only the new credentials and closes the previous
// ones' connections: the documented order loses no connection a workload still needs.
func TestRotationConfigAcceptsBothThenOnlyTheNew(t *testing.T) {
	dir := t.TempDir()
	n, old, err := natsauth.Start(dir, natsconn.FormConfig, hkcli.Permissions(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	next := filepath.Join(dir, "next")
	var out, errOut bytes.Buffer
	if rc := hkcli.Main(context.Background(), []string{"nats-auth", "--out", next, "--previous", dir}, &out, &errOut); rc != 0 {
		t.Fatalf("nats-auth --previous: %s", errOut.String())
	}
	issuedNext := natsconn.Issued{Dir: next, Form: natsconn.FormConfig, CA: old.CA}
	connect := func(issued natsconn.Issued) (*nats.Conn, error) {
		auth, err := issued.Options(n.URL, events.IdentityBridge).Auth(events.IdentityBridge)
		if err != nil {
			t.Fatal(err)
		}
		return nats.Connect(n.URL, append(auth, nats.MaxReconnects(0))...)
	}
	take := func(file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := n.Reload(); err != nil {
			t.Fatalf("reloading with %s: %v", file, err)
		}
	}
	oldConn, err := connect(*old)
	if err != nil {
		t.Fatal(err)
	}
	defer oldConn.Close()
	if _, err := connect(issuedNext); err == nil {
		t.Fatal("the new identities connect before the servers take the rotation's configuration")
	}

	take(filepath.Join(next, natsconn.RotationConfigName))
	newConn, err := connect(issuedNext)
	if err != nil {
		t.Fatalf("the new bridge identity during the rotation: %v", err)
	}
	defer newConn.Close()
	if err := oldConn.FlushTimeout(5 * time.Second); err != nil || !oldConn.IsConnected() {
		t.Fatalf("the previous identity's connection during the rotation: %v (connected %t)", err, oldConn.IsConnected())
	}
	if c, err := connect(*old); err != nil {
		t.Fatalf("the previous identity during the rotation: %v", err)
	} else {
		c.Close()
	}

	take(filepath.Join(next, "accounts.conf"))
	if _, err := connect(*old); err == nil {
		t.Error("the previous identity connects after the rotation")
	}
	deadline := time.Now().Add(5 * time.Second)
	for oldConn.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if oldConn.IsConnected() {
		t.Error("the previous identity's connection stays after the rotation")
	}
	if err := newConn.FlushTimeout(5 * time.Second); err != nil {
		t.Errorf("the new identity's connection after the rotation: %v", err)
	}
}

func decodeB64(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return string(b)
}
