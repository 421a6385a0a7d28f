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
	return LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) {
		endpoint, tlsConfig, err := shootEtcdClient(ctx, c, namespace, etcd)
		if err != nil {
			return nil, "", err
		}
		return etcdconn.Dial(ctx, []string{endpoint}, tlsConfig, zap.NewNop())
	})
}

// shootEtcdClient reads the Etcd resource and its secrets: the endpoint and TLS of its client
// service.
func shootEtcdClient(ctx context.Context, c client.Client, namespace, etcd string) (string, *tls.Config, error) {
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
