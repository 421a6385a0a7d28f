package drill

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// On a real kube-apiserver (which stores NetworkPolicies; no CNI enforces them here): the drill
// function given --live-shoot-etcd and --pod-namespace applies, before it connects to a shoot's
// etcd-main, a NetworkPolicy in the shoot's namespace that admits its own pods (their namespace
// and labels) to etcd-druid's etcd pods on the Etcd's client port, and applies it again without
// a change; without --pod-namespace, or without --live-shoot-etcd, it writes none. A drill whose
// rights do not reach NetworkPolicies compares with no live etcd: the live result is
// Unreachable, its reason naming the policy and the refusal, and the drill goes on.
func TestShootEtcdAdmitsTheDrillPods(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testenv.InstallOpenCRD(ctx, t, admin, EtcdKind, "etcds")

	const drillNamespace = "extension-housekeeper-3c7a1"
	// An entry's shoot namespace, with etcd-druid's Etcd as gardenlet has it: client port 2382
	// here, so that the policy's port is seen to be the Etcd's. Its secrets are missing: the
	// connection fails after the policy, without dialling anything.
	entry := func(project, shoot string, port int64) *extensionsv1alpha1.BackupEntry {
		t.Helper()
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{
			Name: "shoot--" + project + "--" + shoot + "--0b6f5a1e-3c2d-4e8f-9a7b-6c5d4e3f2a10"}}
		ns := gardener.EntryNamespace(be.Name)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		etcd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"etcd": map[string]any{
			"clientPort": port,
			"clientUrlTls": map[string]any{
				"tlsCASecretRef":     map[string]any{"name": "ca-etcd-bundle-3f2a", "dataKey": "bundle.crt"},
				"clientTLSSecretRef": map[string]any{"name": "etcd-client-77ab"},
			},
		}}}}
		etcd.SetGroupVersionKind(EtcdKind)
		etcd.SetNamespace(ns)
		etcd.SetName(gardener.EtcdMain)
		if err := admin.Create(ctx, etcd); err != nil {
			t.Fatal(err)
		}
		return be
	}
	// driller is the drill function built as the chart runs it, with args.
	driller := func(c client.Client, args ...string) *Driller {
		t.Helper()
		fn, err := Definition.Build(ctx, runner.Deps{Client: c}, args...)
		if err != nil {
			t.Fatal(err)
		}
		return fn.Handler.(*Driller)
	}
	live := func(d *Driller, be *extensionsv1alpha1.BackupEntry) LiveEtcd {
		return d.entryTargets(backupv1alpha1.RestoreDrillSpec{}, be).live
	}
	policy := func(be *extensionsv1alpha1.BackupEntry) (*networkingv1.NetworkPolicy, error) {
		np := &networkingv1.NetworkPolicy{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: gardener.EntryNamespace(be.Name), Name: EtcdPolicyName(gardener.EtcdMain)}, np)
		return np, err
	}

	t.Run("applied before the connection, again unchanged", func(t *testing.T) {
		be := entry("dev", "app", 2382)
		ns := gardener.EntryNamespace(be.Name)
		d := driller(admin, "--live-shoot-etcd", "--pod-namespace="+drillNamespace)
		_, _, err := live(d, be).Connect(ctx)
		if err == nil || !strings.Contains(err.Error(), "reading the secret "+ns+"/ca-etcd-bundle-3f2a") {
			t.Fatalf("connecting: %v, want the missing CA secret after the policy", err)
		}
		np, err := policy(be)
		if err != nil {
			t.Fatalf("the NetworkPolicy: %v", err)
		}
		tcp := corev1.ProtocolTCP
		port := intstr.FromInt32(2382)
		want := networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": "etcd-main"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": drillNamespace}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "housekeeper", "app.kubernetes.io/component": "drill"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		}
		if !equality.Semantic.DeepEqual(np.Spec, want) {
			t.Errorf("the policy's spec\n%+v\nwant\n%+v", np.Spec, want)
		}
		if np.Labels["app.kubernetes.io/name"] != "housekeeper" || np.Labels["app.kubernetes.io/component"] != "drill" {
			t.Errorf("the policy's labels %v: not housekeeper's drill's", np.Labels)
		}
		managers := []string{}
		for _, f := range np.ManagedFields {
			managers = append(managers, f.Manager+"/"+string(f.Operation))
		}
		if !slices.Equal(managers, []string{PolicyFieldManager + "/Apply"}) {
			t.Errorf("managed by %v, want %s's server-side apply alone", managers, PolicyFieldManager)
		}
		if _, _, err := live(d, be).Connect(ctx); err == nil {
			t.Fatal("connected without the secrets")
		}
		again, err := policy(be)
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != np.ResourceVersion {
			t.Errorf("the second apply changed the policy: resourceVersion %s, was %s", again.ResourceVersion, np.ResourceVersion)
		}
	})

	t.Run("none without the flags", func(t *testing.T) {
		be := entry("dev", "quiet", 2379)
		if l := live(driller(admin), be); l != nil {
			t.Errorf("without --live-shoot-etcd the entry has a live etcd %v", l)
		}
		if l := live(driller(admin, "--pod-namespace="+drillNamespace), be); l != nil {
			t.Errorf("with --pod-namespace alone the entry has a live etcd %v", l)
		}
		l := live(driller(admin, "--live-shoot-etcd"), be)
		if l == nil {
			t.Fatal("--live-shoot-etcd: no live etcd")
		}
		if _, _, err := l.Connect(ctx); err == nil || !strings.Contains(err.Error(), "reading the secret") {
			t.Fatalf("connecting: %v, want the missing secret", err)
		}
		if _, err := policy(be); !apierrors.IsNotFound(err) {
			t.Errorf("--live-shoot-etcd without --pod-namespace: the policy %v, want none", err)
		}
	})

	t.Run("refused, the live etcd is Unreachable and says why", func(t *testing.T) {
		be := entry("dev", "locked", 2379)
		ns := gardener.EntryNamespace(be.Name)
		// Rights to read Etcds and secrets, none on NetworkPolicies.
		const user = "drill-without-policies"
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{EtcdKind.Group}, Resources: []string{"etcds"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		for _, obj := range []client.Object{role, binding} {
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		cfg := rest.CopyConfig(env.Kube.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		c, err := kube.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := &Result{Revision: 42, NewestPoint: time.Now()}
		if err := compareLive(ctx, live(driller(c, "--live-shoot-etcd", "--pod-namespace="+drillNamespace), be), nil, time.Now(), res); err != nil {
			t.Fatalf("a refused policy failed the drill: %v", err)
		}
		l := res.Live
		wantReason := "the live etcd is not reachable: admitting the drill's pods to the etcd (NetworkPolicy " + ns + "/housekeeper-drill-to-etcd-main): "
		if l == nil || l.Outcome != backupv1alpha1.LiveUnreachable || !strings.HasPrefix(l.Reason, wantReason) || !strings.Contains(l.Reason, "forbidden") {
			t.Errorf("live %+v, want Unreachable with the reason %q…forbidden", l, wantReason)
		}
		if _, err := policy(be); !apierrors.IsNotFound(err) {
			t.Errorf("the refused policy: %v, want none", err)
		}
	})
}
