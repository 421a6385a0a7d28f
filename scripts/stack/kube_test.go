package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The API server and etcd come back after every kill, on their addresses, with their data and
// their certificates: a client made before the first kill reads what it wrote before each.
func TestKubeRestartsAfterKills(t *testing.T) {
	if _, err := ControlPlaneDir(); err != nil {
		t.Skipf("no control plane binaries (make tools): %v", err)
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "kube.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	k, err := StartKube(logs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop() }()
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"kube-apiserver killed", k.RestartAPIServer},
		{"etcd killed", k.KillEtcd},
		{"kube-apiserver killed", k.RestartAPIServer},
		{"kube-apiserver killed", k.RestartAPIServer},
		{"etcd killed", k.KillEtcd},
	}
	for i, step := range steps {
		name := fmt.Sprintf("before-%d", i)
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("step %d: creating %s: %v", i, name, err)
		}
		start := time.Now()
		if err := step.do(); err != nil {
			t.Fatalf("step %d, %s: %v", i, step.name, err)
		}
		// etcd's clients in the API server reconnect by themselves: a read may fail until then.
		err := Poll(time.Minute, 200*time.Millisecond, "namespace "+name+" to be read", func() (bool, string, error) {
			_, err := cs.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			t.Fatalf("step %d, %s: %v", i, step.name, err)
		}
		t.Logf("step %d, %s: serving again after %s", i, step.name, time.Since(start).Round(100*time.Millisecond))
	}
}
