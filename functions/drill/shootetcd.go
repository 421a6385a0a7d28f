package drill

import (
	"context"
	"crypto/tls"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/etcdconn"
)

// EtcdKind is etcd-druid's Etcd resource, read as unstructured: housekeeper does not link
// etcd-druid's API.
var EtcdKind = schema.GroupVersionKind{Group: "druid.gardener.cloud", Version: "v1alpha1", Kind: "Etcd"}

// etcd-druid's and Gardener's defaults (etcd-druid api v0.38: the client port, the CA's data
// key; gardener pkg/utils/secrets: the client certificate's keys).
const (
	defaultEtcdClientPort = 2379
	defaultEtcdCADataKey  = "ca.crt"
	certificateDataKey    = "tls.crt"
	privateKeyDataKey     = "tls.key"
)

// ShootEtcd is the etcd named etcd (etcd-main) in a shoot's control-plane namespace on the
// seed, as etcd-druid serves it: its client service <etcd>-client.<namespace>.svc on the Etcd
// resource's spec.etcd.clientPort (2379), spoken to with the TLS its spec.etcd.clientUrlTls
// names: the CA bundle (tlsCASecretRef, under its dataKey) and the client certificate
// gardenlet issues (clientTLSSecretRef: tls.crt, tls.key). c must read Etcds and Secrets in
// namespace.
func ShootEtcd(c client.Client, namespace, etcd string) LiveEtcd {
	return shootEtcd(c, namespace, etcd, nil)
}

// ShootEtcdFrom is ShootEtcd reached from the pods from, in a seed whose policies deny what they
// do not allow: before it connects, it applies the NetworkPolicy EtcdPolicyName(etcd) in
// namespace that admits from's pods to the etcd's pods on its client port (EtcdPolicy). c must
// also create and patch that NetworkPolicy in namespace; an error to (forbidden, say) is the
// connection's: the live etcd is Unreachable, and the reason says why.
func ShootEtcdFrom(c client.Client, namespace, etcd string, from Pods) LiveEtcd {
	return shootEtcd(c, namespace, etcd, &from)
}

func shootEtcd(c client.Client, namespace, etcd string, from *Pods) LiveEtcd {
	return LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) {
		endpoint, tlsConfig, err := shootEtcdClient(ctx, c, namespace, etcd, from)
		if err != nil {
			return nil, "", err
		}
		return etcdconn.Dial(ctx, []string{endpoint}, tlsConfig, zap.NewNop())
	})
}

// Pods are pods of one namespace with labels, as a NetworkPolicy selects them.
type Pods struct {
	Namespace string
	Labels    map[string]string
}

// DrillPodLabels select the drill function's pods as the chart labels them
// (housekeeper.selector).
var DrillPodLabels = map[string]string{"app.kubernetes.io/name": "housekeeper", "app.kubernetes.io/component": "drill"}

// etcdPodLabels select an Etcd's pods: etcd-druid's default labels, its StatefulSet's selector
// (etcd-druid api/core/v1alpha1 GetDefaultLabels).
func etcdPodLabels(etcd string) map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": etcd}
}

// PolicyFieldManager is the field manager of the drill's NetworkPolicies.
const PolicyFieldManager = "housekeeper-drill"

// EtcdPolicyName is the NetworkPolicy that admits the drill to etcd's pods; the chart's RBAC
// grants create and patch on this name alone.
func EtcdPolicyName(etcd string) string { return "housekeeper-drill-to-" + etcd }

// EtcdPolicy is the NetworkPolicy, in the Etcd's namespace, that admits from's pods to etcd's
// pods on TCP port: ingress only (Gardener's policies of a shoot's namespace deny the rest;
// the egress is the drill pod's namespace's).
func EtcdPolicy(namespace, etcd string, port int32, from Pods) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(EtcdPolicyName(etcd), namespace).
		WithLabels(map[string]string{"app.kubernetes.io/name": "housekeeper", "app.kubernetes.io/component": "drill", "app.kubernetes.io/managed-by": PolicyFieldManager}).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(etcdPodLabels(etcd))).
			WithPolicyTypes("Ingress").
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(networkingv1ac.NetworkPolicyPeer().
					WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: from.Namespace})).
					WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(from.Labels))).
				WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port)))))
}

// admit applies EtcdPolicy: server-side, the drill's fields forced, so a second apply of the
// same policy changes nothing.
func admit(ctx context.Context, c client.Client, namespace, etcd string, port int32, from Pods) error {
	if err := c.Apply(ctx, EtcdPolicy(namespace, etcd, port, from), client.FieldOwner(PolicyFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("admitting the drill's pods to the etcd (NetworkPolicy %s/%s): %w", namespace, EtcdPolicyName(etcd), err)
	}
	return nil
}

// shootEtcdClient reads the Etcd resource and its secrets: the endpoint and TLS of its client
// service. With from, it first admits from's pods to the etcd (admit).
func shootEtcdClient(ctx context.Context, c client.Client, namespace, etcd string, from *Pods) (string, *tls.Config, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(EtcdKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: etcd}, obj); err != nil {
		return "", nil, fmt.Errorf("reading the Etcd %s/%s: %w", namespace, etcd, err)
	}
	port, found, err := unstructured.NestedInt64(obj.Object, "spec", "etcd", "clientPort")
	if err != nil {
		return "", nil, fmt.Errorf("the Etcd %s/%s: spec.etcd.clientPort: %w", namespace, etcd, err)
	}
	if !found {
		port = defaultEtcdClientPort
	}
	if port < 1 || port > 65535 {
		return "", nil, fmt.Errorf("the Etcd %s/%s: spec.etcd.clientPort %d is not a port", namespace, etcd, port)
	}
	endpoint := fmt.Sprintf("https://%s-client.%s.svc:%d", etcd, namespace, port)
	tlsSpec, found, err := unstructured.NestedMap(obj.Object, "spec", "etcd", "clientUrlTls")
	if err != nil || !found {
		return "", nil, fmt.Errorf("the Etcd %s/%s has no spec.etcd.clientUrlTls: the drill speaks to etcds with TLS only", namespace, etcd)
	}
	caName, _, _ := unstructured.NestedString(tlsSpec, "tlsCASecretRef", "name")
	caKey, _, _ := unstructured.NestedString(tlsSpec, "tlsCASecretRef", "dataKey")
	clientName, _, _ := unstructured.NestedString(tlsSpec, "clientTLSSecretRef", "name")
	if caName == "" || clientName == "" {
		return "", nil, fmt.Errorf("the Etcd %s/%s names no CA or no client certificate secret in spec.etcd.clientUrlTls", namespace, etcd)
	}
	if caKey == "" {
		caKey = defaultEtcdCADataKey
	}
	// etcd-druid's client service forwards its port to the same port of the pods, which the
	// policy admits.
	if from != nil {
		if err := admit(ctx, c, namespace, etcd, int32(port), *from); err != nil {
			return "", nil, err
		}
	}
	read := func(name string) (map[string][]byte, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return nil, fmt.Errorf("reading the secret %s/%s: %w", namespace, name, err)
		}
		return s.Data, nil
	}
	ca, err := read(caName)
	if err != nil {
		return "", nil, err
	}
	cert, err := read(clientName)
	if err != nil {
		return "", nil, err
	}
	if len(ca[caKey]) == 0 || len(cert[certificateDataKey]) == 0 || len(cert[privateKeyDataKey]) == 0 {
		return "", nil, fmt.Errorf("the secrets %s/%s (%s) and %s/%s (%s, %s) do not hold the etcd's CA and a client certificate",
			namespace, caName, caKey, namespace, clientName, certificateDataKey, privateKeyDataKey)
	}
	t, err := etcdconn.ClientTLS(ca[caKey], cert[certificateDataKey], cert[privateKeyDataKey])
	if err != nil {
		return "", nil, fmt.Errorf("the etcd's TLS from %s/%s and %s/%s: %w", namespace, caName, namespace, clientName, err)
	}
	return endpoint, t, nil
}
