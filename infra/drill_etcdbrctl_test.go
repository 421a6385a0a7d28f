package infra_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// etcdBackupRestoreImage is the "keda" rendering's drill.etcdBackupRestoreImage: gardener's
// image vector's etcd-backup-restore.
const etcdBackupRestoreImage = "europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl:v0.44.1"

// With drill.etcdBackupRestoreImage, the drill's pod gets etcdbrctl from that image: housekeeper
// copies itself into a shared volume, then runs from etcd-backup-restore's image (which has no
// shell) to copy etcdbrctl there, and the drill runs it (HOUSEKEEPER_ETCDBRCTL), the volume
// read-only. No other function gets any of it; Knative mode refuses the value.
func TestDrillGetsEtcdbrctlFromItsImage(t *testing.T) {
	found := 0
	for _, m := range render(t, "keda") {
		if m.obj.GetKind() != "Deployment" {
			continue
		}
		path := podSpecPath(m.obj)
		inits, _, _ := unstructured.NestedSlice(m.obj.Object, append(path, "initContainers")...)
		cs, _, _ := unstructured.NestedSlice(m.obj.Object, append(path, "containers")...)
		env := fmt.Sprint(cs)
		if functionOf(m.obj) != "drill" {
			if len(inits) != 0 || strings.Contains(env, "HOUSEKEEPER_ETCDBRCTL") {
				t.Errorf("%s: init containers %v, env %s: only the drill runs etcdbrctl", m, inits, env)
			}
			continue
		}
		found++
		if len(inits) != 2 {
			t.Fatalf("%s: %d init containers, want housekeeper's copy and etcdbrctl's", m, len(inits))
		}
		self, tool := inits[0].(map[string]any), inits[1].(map[string]any)
		if !strings.Contains(fmt.Sprint(self["image"]), "housekeeper") || !slices.Equal(strs(self["args"]), []string{"copy-binary", "--to", "/opt/etcdbrctl/housekeeper"}) {
			t.Errorf("first init container %v: want housekeeper copying itself into the volume", self)
		}
		if tool["image"] != etcdBackupRestoreImage || !slices.Equal(strs(tool["command"]), []string{"/opt/etcdbrctl/housekeeper"}) ||
			!slices.Equal(strs(tool["args"]), []string{"copy-binary", "--from", "/etcdbrctl", "--to", "/opt/etcdbrctl/etcdbrctl"}) {
			t.Errorf("second init container %v: want etcd-backup-restore's image running that copy on /etcdbrctl", tool)
		}
		if !strings.Contains(env, "name:HOUSEKEEPER_ETCDBRCTL value:/opt/etcdbrctl/etcdbrctl") {
			t.Errorf("%s: the drill's env %s lacks HOUSEKEEPER_ETCDBRCTL", m, env)
		}
		if !strings.Contains(env, "mountPath:/opt/etcdbrctl name:etcdbrctl readOnly:true") {
			t.Errorf("%s: the drill does not mount the etcdbrctl volume read-only: %s", m, env)
		}
	}
	if found != 1 {
		t.Fatalf("found %d drill Deployments", found)
	}
	_, values := variant(t, "knative")
	values["drill"] = map[string]any{"etcdBackupRestoreImage": etcdBackupRestoreImage}
	if _, err := chart.Render(namespace, values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), "drill.etcdBackupRestoreImage needs mode keda") {
		t.Errorf("knative mode with drill.etcdBackupRestoreImage: %v, want it refused", err)
	}
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}
