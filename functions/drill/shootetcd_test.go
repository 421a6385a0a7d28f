package drill

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
)

// A shoot's etcd-main as gardenlet has etcd-druid deploy it: the client service on the Etcd's
// client port, TLS from the CA bundle and client certificate secrets its clientUrlTls names
// (secrets manager's names carry a hash); what is missing is said, with no secret's content.
func TestShootEtcdClient(t *testing.T) {
	const ns = "shoot--dev--app"
	files, err := natsconn.WriteTLS(t.TempDir(), []string{"etcd-main-client." + ns + ".svc"})
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) []byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ca, cert, key := read(files.CA), read(files.ClientCert), read(files.ClientKey)
	etcd := func(spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"etcd": spec}}}
		u.SetGroupVersionKind(EtcdKind)
		u.SetNamespace(ns)
		u.SetName("etcd-main")
		return u
	}
	clientURLTLS := map[string]any{
		"tlsCASecretRef":     map[string]any{"name": "ca-etcd-bundle-3f2a", "namespace": ns, "dataKey": "bundle.crt"},
		"serverTLSSecretRef": map[string]any{"name": "etcd-server-main-9c1e", "namespace": ns},
		"clientTLSSecretRef": map[string]any{"name": "etcd-client-77ab", "namespace": ns},
	}
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	}
	bundle := secret("ca-etcd-bundle-3f2a", map[string][]byte{"bundle.crt": ca})
	client := secret("etcd-client-77ab", map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": []byte("not this one")})
	for _, tc := range []struct {
		name     string
		etcd     *unstructured.Unstructured
		secrets  []*corev1.Secret
		endpoint string
		err      string
	}{
		{name: "as gardenlet deploys it", etcd: etcd(map[string]any{"clientPort": int64(2379), "clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{bundle, client}, endpoint: "https://etcd-main-client." + ns + ".svc:2379"},
		{name: "etcd-druid's default port", etcd: etcd(map[string]any{"clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{bundle, client}, endpoint: "https://etcd-main-client." + ns + ".svc:2379"},
		{name: "another port", etcd: etcd(map[string]any{"clientPort": int64(2382), "clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{bundle, client}, endpoint: "https://etcd-main-client." + ns + ".svc:2382"},
		{name: "not a port", etcd: etcd(map[string]any{"clientPort": int64(70000), "clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{bundle, client}, err: "the Etcd " + ns + "/etcd-main: spec.etcd.clientPort 70000 is not a port"},
		{name: "no Etcd", err: "reading the Etcd " + ns + "/etcd-main: "},
		{name: "no TLS", etcd: etcd(map[string]any{"clientPort": int64(2379)}),
			err: "the Etcd " + ns + "/etcd-main has no spec.etcd.clientUrlTls: the drill speaks to etcds with TLS only"},
		{name: "no client certificate secret", etcd: etcd(map[string]any{"clientUrlTls": clientURLTLS}), secrets: []*corev1.Secret{bundle},
			err: "reading the secret " + ns + "/etcd-client-77ab: "},
		{name: "the CA under another key", etcd: etcd(map[string]any{"clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{secret("ca-etcd-bundle-3f2a", map[string][]byte{"ca.crt": ca}), client},
			err:     "the secrets " + ns + "/ca-etcd-bundle-3f2a (bundle.crt) and " + ns + "/etcd-client-77ab (tls.crt, tls.key) do not hold the etcd's CA and a client certificate"},
		{name: "a key that is not the certificate's", etcd: etcd(map[string]any{"clientUrlTls": clientURLTLS}),
			secrets: []*corev1.Secret{bundle, secret("etcd-client-77ab", map[string][]byte{"tls.crt": cert, "tls.key": read(files.ServerKey)})},
			err:     "the etcd's TLS from " + ns + "/ca-etcd-bundle-3f2a and " + ns + "/etcd-client-77ab: not a usable certificate and key"},
	} {
		b := fake.NewClientBuilder().WithScheme(kube.Scheme)
		if tc.etcd != nil {
			b = b.WithObjects(tc.etcd)
		}
		for _, s := range tc.secrets {
			b = b.WithObjects(s)
		}
		endpoint, tlsConfig, err := shootEtcdClient(context.Background(), b.Build(), ns, "etcd-main", nil)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("%s: the error quotes key material: %v", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if endpoint != tc.endpoint || tlsConfig.RootCAs == nil || len(tlsConfig.Certificates) != 1 {
			t.Errorf("%s: endpoint %s, TLS with a CA pool %t and %d client certificates; want %s, a pool and one", tc.name,
				endpoint, tlsConfig.RootCAs != nil, len(tlsConfig.Certificates), tc.endpoint)
		}
	}
}
