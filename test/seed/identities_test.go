package seed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

// identitiesChecksum is the pod annotation of the chart that changes with the identities.
const identitiesChecksum = "checksum/nats-identities"

// giveIdentitiesInGarden creates the garden Secret the ControllerDeployment references, as
// infra/docs/deploy.md ("NATS identities") tells operators to: once, in the garden, from what
// `housekeeper nats-auth` wrote (<out>/garden: a key per workload identity, and ca).
func (s *seed) giveIdentitiesInGarden(ctx context.Context, g *garden.Garden, issued natsconn.Issued) {
	s.t.Helper()
	data, err := issued.GardenSecretData(hkcli.WorkloadIdentities())
	if err != nil {
		s.t.Fatal(err)
	}
	if err := g.Client.Create(ctx, garden.NATSIdentities(data)); err != nil {
		s.t.Fatalf("the garden Secret of the NATS identities: %v", err)
	}
}

// reinstall has gardenlet install housekeeper into a new namespace, as it does when
// gardener-controller-manager replaces a seed's ControllerInstallation (a rollback and
// re-registration, the seed's needs gone and back): the installation deleted — its
// ManagedResource, every object of it and its namespace gone — and a new one created, named
// anew. Nobody gives the new namespace anything: the identities come from the garden Secret.
func (s *seed) reinstall(ctx context.Context, gardenlet *garden.Gardenlet, g *garden.Garden, from, to string) {
	t := s.t
	start := time.Now()
	old := &gardencorev1beta1.ControllerInstallation{}
	if err := g.Client.Get(ctx, client.ObjectKey{Name: from}, old); err != nil {
		t.Fatal(err)
	}
	if err := gardenlet.DeleteInstallation(ctx, g.Client, from); err != nil {
		t.Fatal(err)
	}
	t.Logf("ControllerInstallation %s deleted (its ManagedResource, objects and namespace %s gone) in %s", from, s.namespace, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	next := &gardencorev1beta1.ControllerInstallation{ObjectMeta: metav1.ObjectMeta{Name: to}, Spec: *old.Spec.DeepCopy()}
	if err := g.Client.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := gardenlet.ReconcileInstallation(ctx, to); err != nil {
		t.Fatal(err)
	}
	s.namespace = "extension-" + to
	s.allowNodeDNS(ctx)
	s.awaitJobComplete(ctx, s.namespace, "app.kubernetes.io/component=setup", 5*time.Minute)
	s.awaitPods(ctx, s.namespace, "app.kubernetes.io/component=bridge", 2, 3*time.Minute)
	t.Logf("re-installed into %s (setup Job complete, bridge ready; no Secret given there) in %s", s.namespace, time.Since(start).Round(time.Millisecond))
	s.expectIdentitiesFromGarden(ctx, g)
}

// expectIdentitiesFromGarden checks that the installation's identities Secret holds what the
// garden Secret holds, each identity's file under the name the chart mounts.
func (s *seed) expectIdentitiesFromGarden(ctx context.Context, g *garden.Garden) {
	s.t.Helper()
	src := &corev1.Secret{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: garden.Namespace, Name: garden.NATSIdentitiesName}, src); err != nil {
		s.t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "housekeeper-nats"}, got); err != nil {
		s.t.Fatalf("the identities Secret in %s: %v", s.namespace, err)
	}
	if string(got.Data["ca.pem"]) != string(src.Data["ca"]) || string(got.Data["bridge.nk"]) != string(src.Data["bridge"]) || string(got.Data["purge.nk"]) != string(src.Data["purge"]) {
		s.t.Errorf("%s/housekeeper-nats does not hold the garden Secret's identities (keys %d)", s.namespace, len(got.Data))
	}
}

// rotateIdentities rotates the NATS identities as infra/docs/operating.md's runbook "Rotating the NATS
// identities" says, while a burst of n entries is being created and handled:
//  1. new identities (`housekeeper nats-auth --previous <the current ones>`);
//  2. the NATS servers take accounts-rotation.conf (the new and the current users) and reload;
//  3. the garden Secret gets the new identities: gardener-controller-manager records its new
//     resourceVersion in the installation, gardenlet renders it again, the resource manager
//     applies it, and the pods roll to the new identities;
//  4. once rolled out, the servers take the new accounts.conf alone and reload.
//
// Every entry of the burst is Succeeded, and one created afterwards too, served by functions
// connected with the new identities only.
func (s *seed) rotateIdentities(ctx context.Context, gardenlet *garden.Gardenlet, g *garden.Garden, rm *grm.ResourceManager, installation string, n int) {
	t := s.t
	began := time.Now()
	next := natsconn.Issued{Dir: filepath.Join(t.TempDir(), "next"), Form: natsconn.FormConfig, CA: s.issued.CA}
	if err := natsconn.Issue(next.Dir, next.Form, "", hkcli.Permissions()); err != nil {
		t.Fatal(err)
	}
	rotation, err := next.WriteRotationConfig(s.issued.Dir, hkcli.Permissions())
	if err != nil {
		t.Fatal(err)
	}

	// The burst: created one after another while the rotation goes on.
	names := make([]string, n)
	created := make(chan error, 1)
	go func() {
		for i := range n {
			names[i] = fmt.Sprintf("shoot--rotate--r%03d--%05x", i, i)
			if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace(names[i])}}); err != nil {
				created <- err
				return
			}
			if err := s.c.Create(ctx, newBackupEntry(names[i])); err != nil {
				created <- err
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		created <- nil
	}()

	before := map[string]string{}
	deployments, err := s.cs.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var oldSum string
	for _, d := range deployments.Items {
		before[d.Name] = d.Spec.Template.Annotations[identitiesChecksum]
		oldSum = before[d.Name]
		if oldSum == "" {
			t.Fatalf("%s has no %s: the chart does not roll it on new identities", d.Name, identitiesChecksum)
		}
	}
	s.natsTakes(ctx, rotation, "the rotation's accounts (new and current users)")
	secret := &corev1.Secret{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: garden.Namespace, Name: garden.NATSIdentitiesName}, secret); err != nil {
		t.Fatal(err)
	}
	data, err := next.GardenSecretData(hkcli.WorkloadIdentities())
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = data
	if err := g.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// What gardener-controller-manager does on the change of a referenced Secret: the
	// installation's resourceRefs carry its new resourceVersion, and gardenlet reconciles it.
	ci := &gardencorev1beta1.ControllerInstallation{}
	if err := g.Client.Get(ctx, client.ObjectKey{Name: installation}, ci); err != nil {
		t.Fatal(err)
	}
	ci.Spec.ResourceRefs = []corev1.ObjectReference{{Kind: "Secret", Name: secret.Name, Namespace: secret.Namespace, ResourceVersion: secret.ResourceVersion}}
	if err := g.Client.Update(ctx, ci); err != nil {
		t.Fatal(err)
	}
	if err := gardenlet.ReconcileInstallation(ctx, installation); err != nil {
		t.Fatal(err)
	}
	if err := rm.Resync(ctx, client.ObjectKey{Namespace: garden.Namespace, Name: installation}); err != nil {
		t.Fatal(err)
	}
	s.eventually(3*time.Minute, "every pod rolled to the new identities", func() (bool, string) {
		got := &corev1.Secret{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "housekeeper-nats"}, got); err != nil {
			return false, err.Error()
		}
		if string(got.Data["bridge.nk"]) != string(data["bridge"]) {
			return false, "the identities Secret in the seed still holds the current identities"
		}
		deployments, err := s.cs.AppsV1().Deployments(s.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range deployments.Items {
			sum := d.Spec.Template.Annotations[identitiesChecksum]
			if sum == "" || sum == before[d.Name] {
				return false, fmt.Sprintf("%s: pod template still of the current identities (%s %q)", d.Name, identitiesChecksum, sum)
			}
			if st := d.Status; st.ObservedGeneration != d.Generation || st.UpdatedReplicas != st.Replicas || st.ReadyReplicas != st.Replicas {
				return false, fmt.Sprintf("%s: %d updated, %d ready of %d (generation %d observed %d)", d.Name, st.UpdatedReplicas, st.ReadyReplicas, st.Replicas, d.Generation, st.ObservedGeneration)
			}
		}
		// No pod of the current identities left (the setup Job's completed pod has no checksum).
		pods, err := s.cs.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component!=setup"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if sum := p.Annotations[identitiesChecksum]; sum == "" || sum == before[p.Labels["app.kubernetes.io/component"]] || sum == oldSum {
				return false, fmt.Sprintf("pod %s still of the current identities (%s)", p.Name, podState(&p))
			}
		}
		return true, ""
	})
	t.Logf("the pods rolled to the new identities %s after the rotation began", time.Since(began).Round(time.Millisecond))
	if err := <-created; err != nil {
		t.Fatalf("creating the burst: %v", err)
	}
	s.natsTakes(ctx, filepath.Join(next.Dir, "accounts.conf"), "the new accounts alone")
	s.issued = next

	s.eventually(5*time.Minute, fmt.Sprintf("%d entries created during the rotation Succeeded", n), func() (bool, string) {
		done := 0
		var stuck string
		for _, name := range names {
			be := &extensionsv1alpha1.BackupEntry{}
			if err := s.c.Get(ctx, client.ObjectKey{Name: name}, be); err != nil {
				return false, err.Error()
			}
			if op := be.Status.LastOperation; op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded {
				done++
			} else if stuck == "" {
				stuck = fmt.Sprintf("%s: %+v", be.Name, op)
			}
		}
		return done == n, fmt.Sprintf("%d of %d Succeeded; e.g. %s", done, n, stuck)
	})
	t.Logf("a burst of %d entries during the rotation: all Succeeded %s after it began", n, time.Since(began).Round(time.Millisecond))
	after := time.Now()
	s.newEntryIn(ctx, gardenerBucket, "shoot--dev--rotated--2b7c9")
	t.Logf("an entry after the rotation, with only the new identities accepted: Succeeded in %s", time.Since(after).Round(time.Millisecond))
}

// natsTakes gives the NATS servers accounts (the Secret nats-accounts, which each pod mounts as
// accounts.conf) and has each reload it (SIGHUP through the container runtime, as `nats-server
// --signal reload` does), until each has logged that it reloaded its accounts: the kubelet
// updates the mounted file within its sync period.
func (s *seed) natsTakes(ctx context.Context, accounts, what string) {
	t := s.t
	start := time.Now()
	conf, err := os.ReadFile(accounts)
	if err != nil {
		t.Fatal(err)
	}
	pods := []string{"nats-0", "nats-1", "nats-2"}
	before := map[string]int{}
	for _, p := range pods {
		before[p] = s.reloads(ctx, p)
	}
	sec := &corev1.Secret{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: natsNamespace, Name: "nats-accounts"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{"accounts.conf": conf}
	if err := s.c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	// The kubelet updates the mounted file within its sync period; only then is a reload worth it.
	s.eventually(2*time.Minute, "every NATS pod sees "+what, func() (bool, string) {
		var stale []string
		for _, p := range pods {
			if got, err := s.node.ReadContainerFile(ctx, natsNamespace, p, "nats", "/etc/nats/accounts/accounts.conf"); err != nil || string(got) != string(conf) {
				stale = append(stale, fmt.Sprintf("%s (%v)", p, err))
			}
		}
		return len(stale) == 0, fmt.Sprintf("accounts.conf not updated yet in %v", stale)
	})
	for _, p := range pods {
		if err := s.node.SignalContainer(ctx, natsNamespace, p, "nats", "SIGHUP"); err != nil {
			t.Fatal(err)
		}
	}
	s.eventually(time.Minute, "every NATS server reloaded "+what, func() (bool, string) {
		var waiting []string
		for _, p := range pods {
			if s.reloads(ctx, p) <= before[p] {
				waiting = append(waiting, p)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("not reloaded yet: %v", waiting)
	})
	t.Logf("NATS servers reloaded with %s in %s", what, time.Since(start).Round(time.Millisecond))
}

// reloads counts the accounts reloads the NATS pod's server logged.
func (s *seed) reloads(ctx context.Context, pod string) int {
	logs, err := s.cs.CoreV1().Pods(natsNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "nats"}).DoRaw(ctx)
	if err != nil {
		return -1
	}
	return strings.Count(string(logs), "Reloaded: accounts")
}
