package seed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/grm"
)

const (
	// gardenSeedName is the node's Seed in the garden; gardenlet makes it housekeeper's cluster.
	gardenSeedName = "seed-node"
	// installationName is the ControllerInstallation of housekeeper's registration for the Seed,
	// housekeeper-<random> as gardener-controller-manager names it; gardenlet installs into
	// extension-<it>.
	installationName = "housekeeper-6fj2q"
	// reinstalledName is the installation that replaces it: gardenlet installs into
	// extension-<it>, a new namespace.
	reinstalledName = "housekeeper-r8t3w"
	// The bucket and entry the re-installed release converges.
	reinstalledBucket = "seed-reinstalled"
	reinstalledEntry  = "shoot--dev--reinstalled--8d2f1"
	// The bucket and entry the Gardener-installed release converges.
	gardenerBucket = "seed-gardener"
	gardenerEntry  = "shoot--dev--gardener--5b7d3"
	// careSyncPeriod is gardenlet's ControllerInstallation care sync period here (its
	// controllers.controllerInstallationCare.syncPeriod, 30 s by default): the test waits for
	// one sync after the resource manager's resync.
	careSyncPeriod = 10 * time.Second
)

// startGarden starts the garden (gardener-apiserver in-process, kube-apiserver, etcd) and stops it
// when the test ends. Not beside a scenario: gardener-apiserver, starting, sets klog's global
// configuration, which the test's clients read (the race detector caught it when the garden
// came up while scenario 6 waited for its purge).
func (s *seed) startGarden() *garden.Garden {
	s.t.Helper()
	start := time.Now()
	g, err := garden.Start(garden.Options{Dir: s.t.TempDir(), Output: s.logFile("garden-apiservers")})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			s.t.Errorf("stopping the garden: %v", err)
		}
	})
	s.t.Logf("garden up (gardener-apiserver) in %s", time.Since(start).Round(time.Millisecond))
	return g
}

// installTheGardenerWay is the Gardener install path, end to end, on the node: the by-hand
// release uninstalled as an operator would, the node registered as a Seed whose backup provider
// is local, housekeeper's ControllerRegistration and ControllerDeployment
// (infra/gardener/controller-registration.yaml) with the values an operator changes for this
// seed, gardenlet's ControllerInstallation reconciler rendering the chart into a
// ManagedResource, gardener-resource-manager applying it to the node, and gardenlet's care and
// NetworkPolicy controllers doing in the seed what they do. It then reads the installation as an
// operator does — the ManagedResource's and the ControllerInstallation's conditions, the pods,
// KEDA's replicas — has a bucket and an entry converge through the release, and checks that the
// installation stays installed and healthy across the resource manager's next apply, the
// completed setup Job still there.
func (s *seed) installTheGardenerWay(ctx context.Context) {
	t := s.t
	began := time.Now()
	start := time.Now()
	s.uninstallByHand(ctx)
	t.Logf("the by-hand release uninstalled (its objects and namespace gone) in %s", time.Since(start).Round(time.Millisecond))
	g := s.startGarden()

	start = time.Now()
	s.prepareSeed(ctx)
	// The operator gives the NATS identities once, in the garden, before any installation.
	s.giveIdentitiesInGarden(ctx, g, s.issued)
	reg, dep := s.registerInGarden(ctx, g)
	seedClient, err := client.New(s.kube.Config, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := grm.Start(grm.Options{Source: s.kube.Config, Logger: garden.Logger(s.logFile("gardener-resource-manager"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rm.Stop(); err != nil {
			t.Errorf("gardener-resource-manager: %v", err)
		}
	})
	gardenlet, err := garden.StartGardenlet(garden.GardenletOptions{Garden: g.Config, Seed: s.kube.Config, SeedName: gardenSeedName,
		CareSyncPeriod: careSyncPeriod, NetworkPolicies: true, Logger: garden.Logger(s.logFile("gardenlet"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gardenlet.Stop(); err != nil {
			t.Errorf("gardenlet: %v", err)
		}
	})
	// gardener-controller-manager creates the installation for a seed that needs the registered
	// kinds and types (here: BackupBucket/local, the Seed's backup provider); none runs here.
	installation := &gardencorev1beta1.ControllerInstallation{
		ObjectMeta: metav1.ObjectMeta{Name: installationName},
		Spec: gardencorev1beta1.ControllerInstallationSpec{
			RegistrationRef: corev1.ObjectReference{Name: reg.Name},
			DeploymentRef:   &corev1.ObjectReference{Name: dep.Name},
			SeedRef:         &corev1.ObjectReference{Name: gardenSeedName},
		},
	}
	if err := g.Client.Create(ctx, installation); err != nil {
		t.Fatal(err)
	}
	if err := gardenlet.ReconcileInstallation(ctx, installationName); err != nil {
		t.Fatal(err)
	}
	s.namespace = "extension-" + installationName
	t.Logf("garden, Seed, registration, gardenlet and gardener-resource-manager up, the chart rendered into ManagedResource %s/%s in %s",
		garden.Namespace, installationName, time.Since(start).Round(time.Millisecond))

	// Nothing is created in the namespace gardenlet made: the identities come with the
	// installation, from the garden Secret.
	start = time.Now()
	s.allowNodeDNS(ctx)
	s.awaitJobComplete(ctx, s.namespace, "app.kubernetes.io/component=setup", 5*time.Minute)
	s.awaitPods(ctx, s.namespace, "app.kubernetes.io/component=bridge", 2, 3*time.Minute)
	t.Logf("Gardener-installed release up (setup Job complete, bridge ready) in %s", time.Since(start).Round(time.Millisecond))
	s.expectIdentitiesFromGarden(ctx, g)
	s.awaitAtRest(ctx, "the Gardener-installed release at rest")
	operator := garden.Installation{Name: installationName, Seed: seedClient, Garden: g.Client}
	s.awaitInstalledAndHealthy(ctx, operator, "installed and healthy")
	s.checkGardenerPolicies(ctx)

	// A bucket and an entry converge through the release gardenlet installed. The functions
	// KEDA wakes from zero and puts back are no rollout and no failure: the installation stays
	// healthy throughout (the chart's skip-health-check on them), where every wake used to turn
	// it Healthy=False and Progressing=True, and the seed's ExtensionsReady with it.
	seen := s.recordInstallation(g, operator)
	s.newBucketAndEntry(ctx, gardenerBucket, gardenerEntry)
	s.awaitAtRest(ctx, "the Gardener-installed release back at rest")
	s.awaitInstalledAndHealthy(ctx, operator, "installed and healthy after the bucket and the entry")
	s.expectOnlyHealthy("while KEDA woke the functions and put them back", seen)

	s.resyncStaysHealthy(ctx, rm, g, operator)
	s.setupRunsAgain(ctx, operator)

	// A re-installation into a new namespace: the identities arrive by themselves, the functions
	// connect, a bucket and an entry converge.
	s.reinstall(ctx, gardenlet, g, installationName, reinstalledName)
	s.awaitAtRest(ctx, "the re-installed release at rest")
	s.newBucketAndEntry(ctx, reinstalledBucket, reinstalledEntry)
	s.awaitAtRest(ctx, "the re-installed release back at rest")

	// The identities rotated while entries are created and handled: none is lost.
	s.rotateIdentities(ctx, gardenlet, g, rm, reinstalledName, 40)
	t.Logf("the Gardener install path, from the by-hand release's uninstall, in %s", time.Since(began).Round(time.Millisecond))
}

// uninstallByHand uninstalls the by-hand release as `helm uninstall` and `kubectl delete
// namespace` would: every object the chart rendered (with the values last installed), then the
// namespace the operator created with the identities Secret in it; it waits until the namespace,
// and so every pod of the release, is gone. The CRDs stay, as helm keeps a chart's CRDs (and
// with them every EtcdBackupConfig): gardener-resource-manager takes them over.
func (s *seed) uninstallByHand(ctx context.Context) {
	t := s.t
	for _, obj := range s.renderChart(s.values) {
		if obj.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := s.c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if err := s.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hkNamespace}}); err != nil {
		t.Fatal(err)
	}
	s.eventually(3*time.Minute, "namespace "+hkNamespace+" gone", func() (bool, string) {
		err := s.c.Get(ctx, client.ObjectKey{Name: hkNamespace}, &corev1.Namespace{})
		pods, _ := s.cs.CoreV1().Pods(hkNamespace).List(ctx, metav1.ListOptions{})
		var states []string
		for _, p := range pods.Items {
			states = append(states, podState(&p))
		}
		return apierrors.IsNotFound(err), fmt.Sprintf("%v; pods: %s", err, strings.Join(states, "; "))
	})
}

// prepareSeed gives the node what a seed has before any extension: the CRDs of what an
// extension's chart deploys and of gardenlet's Cluster, and the PriorityClass the
// ControllerDeployment names, which gardenlet creates in every seed (pkg/component/seed/system,
// gardener-system-900, with its value). The garden namespace exists (scenario 2's secrets).
func (s *seed) prepareSeed(ctx context.Context) {
	if err := garden.InstallSeedCRDs(s.kube.Config, append(slices.Clone(garden.ExtensionCRDs), garden.ClusterCRD)...); err != nil {
		s.t.Fatal(err)
	}
	s.create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: v1beta1constants.PriorityClassNameSeedSystem900},
		Value: 999998900, Description: "PriorityClass for Seed system components"})
}

// seedManifest is the node's Seed: its provider and backup provider local, its networks the
// node's own (gardenlet's NetworkPolicy controller derives its policies from them), and the
// ingress and DNS gardener-apiserver requires of every seed.
const seedManifest = `
apiVersion: core.gardener.cloud/v1beta1
kind: Seed
metadata: {name: %[1]s}
spec:
  provider: {type: local, region: local}
  backup:
    provider: local
    region: local
    credentialsRef: {apiVersion: v1, kind: Secret, name: backup-local, namespace: garden}
  networks: {pods: %[2]s, services: %[3]s, nodes: %[4]s}
  ingress: {domain: %[1]s.seed.example.com, controller: {kind: nginx}}
  dns:
    provider: {type: local, credentialsRef: {apiVersion: v1, kind: Secret, name: dns, namespace: garden}}
    internal: {type: local, domain: internal.%[1]s.example.com, credentialsRef: {apiVersion: v1, kind: Secret, name: dns, namespace: garden}}
`

// registerInGarden registers the node as a Seed (with its cluster identity, which gardenlet
// sets) and housekeeper's ControllerRegistration and ControllerDeployment, the chart inline, with
// what an operator changes for this seed: the type local in the registration's resources and
// the values' types, local.hostPath, and KEDA polling and cooldown as short as the by-hand
// install's. Everything else stays as shipped (priority class, monitoring, VPA, three stream
// replicas).
func (s *seed) registerInGarden(ctx context.Context, g *garden.Garden) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	t := s.t
	_, nodes, err := net.ParseCIDR(s.node.NodeIP + "/30")
	if err != nil {
		t.Fatal(err)
	}
	seed := &gardencorev1beta1.Seed{}
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(seedManifest, gardenSeedName, s.node.PodCIDR, s.node.ServiceCIDR, nodes)), seed); err != nil {
		t.Fatal(err)
	}
	if err := g.Client.Create(ctx, seed); err != nil {
		t.Fatalf("gardener-apiserver refuses the Seed: %v", err)
	}
	seed.Status.ClusterIdentity = new("seed-" + gardenSeedName)
	if err := g.Client.Status().Update(ctx, seed); err != nil {
		t.Fatal(err)
	}

	// The registration `make release` wrote: the chart in the registry (gardenlet pulls it),
	// the images pinned by digest (the node pulls them).
	reg, dep, err := garden.DecodeRegistration(s.release.Registration)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reg.Spec.Resources {
		reg.Spec.Resources[i].Type = "local"
	}
	var values map[string]any
	if err := json.Unmarshal(dep.Helm.Values.Raw, &values); err != nil {
		t.Fatal(err)
	}
	values["types"] = []any{"local"}
	values["local"] = map[string]any{"hostPath": s.root}
	values["functions"] = s.values["functions"]
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	dep.Helm.Values = &apiextensionsv1.JSON{Raw: raw}
	s.values = values
	for _, obj := range []client.Object{dep, reg} {
		if err := g.Client.Create(ctx, obj); err != nil {
			t.Fatalf("gardener-apiserver refuses housekeeper's %T: %v", obj, err)
		}
	}
	return reg, dep
}

// allowNodeDNS is a stand-in, not Gardener's: gardenlet's allow-to-dns lets the pods labelled
// networking.gardener.cloud/to-dns reach the DNS a seed runs — CoreDNS pods in kube-system
// (k8s-app=kube-dns), node-local-dns, the DNS Service's ClusterIP (the services network's tenth
// address) — none of which this node has: its CoreDNS is a process on the host, on HostIP:53
// (stack.Node), the pods' nameserver. This policy lets the same pods reach that address, as
// allow-to-dns would reach CoreDNS in a seed.
func (s *seed) allowNodeDNS(ctx context.Context) {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	s.create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "stand-in-allow-to-node-dns", Namespace: s.namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1beta1constants.LabelNetworkPolicyToDNS: v1beta1constants.LabelNetworkPolicyAllowed}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: s.node.HostIP + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: new(intstr.FromInt32(53))}, {Protocol: &tcp, Port: new(intstr.FromInt32(53))}},
			}},
		},
	})
}

// checkGardenerPolicies checks that gardenlet's NetworkPolicy controller made the extension
// namespace what it makes it in a seed: everything denied but what the pods' labels allow, the
// API server allowed by the address and port the `kubernetes` Service leads to.
func (s *seed) checkGardenerPolicies(ctx context.Context) {
	t := s.t
	list := &networkingv1.NetworkPolicyList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]networkingv1.NetworkPolicy{}
	for _, p := range list.Items {
		byName[p.Name] = p
	}
	for _, name := range []string{"deny-all", "allow-to-dns", "allow-to-runtime-apiserver", "allow-to-public-networks", "allow-to-private-networks"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("gardenlet's NetworkPolicy controller made no %s in %s (policies: %v)", name, s.namespace, slices.Sorted(maps.Keys(byName)))
		}
	}
	apiServer := fmt.Sprintf("%s/32:%d", s.node.HostIP, s.node.APIServerPort)
	var allowed []string
	for _, rule := range byName["allow-to-runtime-apiserver"].Spec.Egress {
		for _, to := range rule.To {
			for _, p := range rule.Ports {
				if to.IPBlock != nil && p.Port != nil {
					allowed = append(allowed, fmt.Sprintf("%s:%d", to.IPBlock.CIDR, p.Port.IntVal))
				}
			}
		}
	}
	if !slices.Contains(allowed, apiServer) {
		t.Errorf("allow-to-runtime-apiserver allows %v, not the API server the pods reach (%s)", allowed, apiServer)
	}
	t.Logf("NetworkPolicies in %s: %v", s.namespace, slices.Sorted(maps.Keys(byName)))
}

// installedAndHealthy is the ManagedResource of an installation that is in place: applied,
// every object healthy, none progressing.
func installedAndHealthy(mr *resourcesv1alpha1.ManagedResource) error {
	return errors.Join(
		garden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesApplied, gardencorev1beta1.ConditionTrue, resourcesv1alpha1.ConditionApplySucceeded, ""),
		garden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesHealthy, gardencorev1beta1.ConditionTrue, "ResourcesHealthy", ""),
		garden.ExpectCondition(mr.Status.Conditions, resourcesv1alpha1.ResourcesProgressing, gardencorev1beta1.ConditionFalse, "ResourcesRolledOut", ""))
}

// installationHealthy is what gardenlet's reconciler and care controller say of such an
// installation.
func installationHealthy(ci *gardencorev1beta1.ControllerInstallation) error {
	return errors.Join(
		garden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationValid, gardencorev1beta1.ConditionTrue, "RegistrationValid", ""),
		garden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationInstalled, gardencorev1beta1.ConditionTrue, "InstallationSuccessful", ""),
		garden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy, gardencorev1beta1.ConditionTrue, "ControllerHealthy", ""),
		garden.ExpectCondition(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationProgressing, gardencorev1beta1.ConditionFalse, "ControllerRolledOut", ""))
}

// awaitInstalledAndHealthy waits until the ManagedResource in the seed and the
// ControllerInstallation in the garden both say the installation is in place, and logs them.
func (s *seed) awaitInstalledAndHealthy(ctx context.Context, operator garden.Installation, what string) {
	s.t.Helper()
	start := time.Now()
	var mr *resourcesv1alpha1.ManagedResource
	var ci *gardencorev1beta1.ControllerInstallation
	s.eventually(2*time.Minute, what, func() (bool, string) {
		var mrErr, ciErr error
		mr, mrErr = operator.ManagedResource(ctx, installedAndHealthy)
		ci, ciErr = operator.ControllerInstallation(ctx, installationHealthy)
		err := errors.Join(mrErr, ciErr)
		return err == nil, fmt.Sprint(err)
	})
	s.t.Logf("%s (%s): ManagedResource %s; ControllerInstallation %s", what, time.Since(start).Round(time.Millisecond),
		garden.DescribeConditions(mr.Status.Conditions, false), garden.DescribeConditions(ci.Status.Conditions, false))
}

// resyncStaysHealthy forces gardener-resource-manager's next apply (hourly in a seed) and waits
// for gardenlet's next care sync: the installation stays installed and healthy throughout, the
// completed setup Job stays (it has no TTL: test/conformance shows a Job that expires reported
// missing), and the functions stay at the zero replicas KEDA put them at (the chart's
// Deployments have no replicas field, which the resource manager keeps). Both are observed, not
// assumed: a label the chart sets, taken off its ConfigMap before, is back after the apply, and
// a condition message marked stale is the care controller's again after its sync.
func (s *seed) resyncStaysHealthy(ctx context.Context, rm *grm.ResourceManager, g *garden.Garden, operator garden.Installation) {
	t := s.t
	job := s.setupJob(ctx)
	generations := map[string]int64{}
	for _, fn := range all.Names() {
		d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		generations[fn] = d.Generation
	}
	seen := s.recordInstallation(g, operator)

	const drifted = "app.kubernetes.io/part-of"
	config := client.ObjectKey{Namespace: s.namespace, Name: "housekeeper-config"}
	s.patchLabels(ctx, config, map[string]any{drifted: nil})
	start := time.Now()
	if err := rm.Resync(ctx, operator.ManagedResourceKey()); err != nil {
		t.Fatal(err)
	}
	s.eventually(time.Minute, "gardener-resource-manager applies the ManagedResource again", func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, config, cm); err != nil {
			return false, err.Error()
		}
		_, ok := cm.Labels[drifted]
		return ok, fmt.Sprintf("ConfigMap %s labels %v", config, cm.Labels)
	})
	applied := time.Since(start)
	// A care sync is observed the same way: the message of the installation's Healthy condition,
	// marked stale here, is gardenlet's again once its care controller has read the
	// ManagedResource (at least once a sync period; the mark itself wakes nothing).
	s.markHealthyStale(ctx, g)
	start = time.Now()
	for synced := false; !synced; time.Sleep(500 * time.Millisecond) {
		if time.Since(start) > 3*careSyncPeriod {
			t.Fatalf("no care sync within %s of the resync: the installation's Healthy condition is still marked %q", 3*careSyncPeriod, staleMark)
		}
		if now := s.setupJob(ctx); now.UID != job.UID || now.Status.Succeeded == 0 {
			t.Fatalf("the setup Job after the resync: %s uid %s succeeded %d, want the completed %s uid %s", now.Name, now.UID, now.Status.Succeeded, job.Name, job.UID)
		}
		for _, fn := range all.Names() {
			d, err := s.cs.AppsV1().Deployments(s.namespace).Get(ctx, "housekeeper-"+fn, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Generation != generations[fn] || d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
				t.Fatalf("the %s function after the resync: generation %d (was %d), replicas %v: the apply changed KEDA's zero", fn, d.Generation, generations[fn], d.Spec.Replicas)
			}
		}
		ci := &gardencorev1beta1.ControllerInstallation{}
		if err := g.Client.Get(ctx, client.ObjectKey{Name: installationName}, ci); err != nil {
			t.Fatal(err)
		}
		healthy := garden.ConditionOf(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy)
		synced = healthy != nil && healthy.Message != staleMark
	}
	t.Logf("a care sync %s after the resync's apply", time.Since(start).Round(time.Second))
	s.awaitInstalledAndHealthy(ctx, operator, "installed and healthy after gardener-resource-manager's resync and a care sync")
	t.Logf("resync applied in %s", applied.Round(time.Millisecond))
	s.expectOnlyHealthy("across the resync", seen)
	t.Logf("the setup Job %s still complete after the resync and a care sync", job.Name)
}

// setupRunsAgain runs the kubectl lines of infra/docs/operating.md's "NATS lost" runbook as
// written, in the namespace gardenlet made: the setup Job is deleted, and the one
// gardener-resource-manager applies in its place (a new uid) completes, well before the hourly
// sync would have re-created it; the installation is healthy again.
func (s *seed) setupRunsAgain(ctx context.Context, operator garden.Installation) {
	t := s.t
	before := s.setupJob(ctx)
	var lines []string
	for line := range strings.Lines(s.operatingBlock("component=setup")) {
		if strings.HasPrefix(line, "kubectl ") {
			lines = append(lines, strings.ReplaceAll(line, "<extension namespace>", s.namespace))
		}
	}
	if len(lines) != 2 {
		t.Fatalf("the NATS lost runbook has %d kubectl lines, want the Job's deletion and the ManagedResource's annotation: %q", len(lines), lines)
	}
	start := time.Now()
	if out, err := s.kubectlScript(ctx, t.TempDir(), strings.Join(lines, "")); err != nil {
		t.Fatalf("the NATS lost runbook's kubectl lines: %v\n%s", err, out)
	}
	s.eventually(2*time.Minute, "a new setup Job complete", func() (bool, string) {
		jobs, err := s.cs.BatchV1().Jobs(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=setup"})
		if err != nil || len(jobs.Items) != 1 {
			return false, fmt.Sprintf("%d setup Jobs: %v", len(jobs.Items), err)
		}
		j := jobs.Items[0]
		return j.UID != before.UID && j.Status.Succeeded > 0, fmt.Sprintf("%s uid %s (was %s) succeeded %d", j.Name, j.UID, before.UID, j.Status.Succeeded)
	})
	t.Logf("the setup Job ran again %s after the runbook's kubectl lines", time.Since(start).Round(time.Millisecond))
	s.awaitInstalledAndHealthy(ctx, operator, "installed and healthy after the setup Job ran again")
}

// expectOnlyHealthy fails unless the states recorded (recordInstallation) are all healthy ones,
// and there is at least one of each object.
func (s *seed) expectOnlyHealthy(when string, seen func() (mr, ci []string)) {
	s.t.Helper()
	mrStates, ciStates := seen()
	s.t.Logf("%s: ManagedResource %s; ControllerInstallation %s", when, strings.Join(mrStates, " → "), strings.Join(ciStates, " → "))
	healthyMR := "ResourcesApplied=True/ApplySucceeded; ResourcesHealthy=True/ResourcesHealthy; ResourcesProgressing=False/ResourcesRolledOut"
	healthyCI := "Valid=True/RegistrationValid; Installed=True/InstallationSuccessful; Healthy=True/ControllerHealthy; Progressing=False/ControllerRolledOut"
	for _, seen := range []struct {
		what, healthy string
		states        []string
	}{{"ManagedResource", healthyMR, mrStates}, {"ControllerInstallation", healthyCI, ciStates}} {
		if len(seen.states) == 0 {
			s.t.Errorf("the watch of the %s delivered nothing %s", seen.what, when)
		}
		for _, state := range seen.states {
			if !sameConditions(state, seen.healthy) {
				s.t.Errorf("the %s was %q %s, want only %q", seen.what, state, when, seen.healthy)
			}
		}
	}
}

// staleMark is the message markHealthyStale writes.
const staleMark = "marked stale by the test: gardenlet's care controller writes this condition again at its next sync"

// markHealthyStale replaces the message of the installation's Healthy condition with staleMark,
// keeping its status and reason. The care controller wakes on ManagedResource changes and its
// sync period, not on its own writes' target: the mark stays until its next sync rewrites it.
func (s *seed) markHealthyStale(ctx context.Context, g *garden.Garden) {
	s.t.Helper()
	ci := &gardencorev1beta1.ControllerInstallation{}
	if err := g.Client.Get(ctx, client.ObjectKey{Name: installationName}, ci); err != nil {
		s.t.Fatal(err)
	}
	patch := client.MergeFrom(ci.DeepCopy())
	healthy := garden.ConditionOf(ci.Status.Conditions, gardencorev1beta1.ControllerInstallationHealthy)
	if healthy == nil {
		s.t.Fatal("the installation has no Healthy condition")
	}
	healthy.Message = staleMark
	if err := g.Client.Status().Patch(ctx, ci, patch); err != nil {
		s.t.Fatal(err)
	}
}

// sameConditions compares two DescribeConditions strings regardless of the conditions' order.
func sameConditions(a, b string) bool {
	as, bs := strings.Split(a, "; "), strings.Split(b, "; ")
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// setupJob is the release's setup Job (one: the chart names it after its configuration).
func (s *seed) setupJob(ctx context.Context) *batchv1.Job {
	s.t.Helper()
	jobs, err := s.cs.BatchV1().Jobs(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=setup"})
	if err != nil {
		s.t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		s.t.Fatalf("%d setup Jobs in %s, want 1", len(jobs.Items), s.namespace)
	}
	return &jobs.Items[0]
}

// patchLabels merge-patches the object's labels (nil removes one), as `kubectl label` does.
func (s *seed) patchLabels(ctx context.Context, key client.ObjectKey, labels map[string]any) {
	s.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		s.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := s.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		s.t.Fatal(err)
	}
}

// recordInstallation records every state of the installation's conditions, the
// ManagedResource's and the ControllerInstallation's, from now until the returned function.
func (s *seed) recordInstallation(g *garden.Garden, operator garden.Installation) func() (mr, ci []string) {
	s.t.Helper()
	mrSeen, err := garden.RecordConditions(s.kube.Config, kubernetes.SeedScheme, &resourcesv1alpha1.ManagedResourceList{}, operator.ManagedResourceKey())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { mrSeen.Stop() })
	ciSeen, err := garden.RecordConditions(g.Config, kubernetes.GardenScheme, &gardencorev1beta1.ControllerInstallationList{}, client.ObjectKey{Name: operator.Name})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { ciSeen.Stop() })
	return func() ([]string, []string) { return mrSeen.Stop(), ciSeen.Stop() }
}
