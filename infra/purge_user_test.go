package infra_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
)

// etcdBackupRestoreUser is the uid and gid etcd-druid runs etcd-backup-restore as. On the
// local provider it writes its snapshots as that user with umask 0077 (files 0600, directories
// 0700), so only that user can delete them: the purge must run as the same uid and gid.
// test/etcdbr purges such files as this user.
const etcdBackupRestoreUser = 65532

// Every rendered purge workload runs as etcd-backup-restore's user, whatever the pod and
// container securityContexts combine to.
func TestPurgeRunsAsEtcdBackupRestoreUser(t *testing.T) {
	checked := 0
	for _, m := range allManifests(t) {
		path := podSpecPath(m.obj)
		if path == nil || functionOf(m.obj) != entry.PurgeDefinition.Name {
			continue
		}
		pod, _, _ := unstructured.NestedMap(m.obj.Object, append(path, "securityContext")...)
		cs, _, _ := unstructured.NestedSlice(m.obj.Object, append(path, "containers")...)
		for _, c := range cs {
			c := c.(map[string]any)
			ctr, _, _ := unstructured.NestedMap(c, "securityContext")
			for _, field := range []string{"runAsUser", "runAsGroup"} {
				v, ok := ctr[field]
				if !ok {
					v = pod[field]
				}
				if fmt.Sprint(v) != fmt.Sprint(etcdBackupRestoreUser) {
					t.Errorf("%s: container %v has %s %v, want %d (etcd-backup-restore's user)", m, c["name"], field, v, etcdBackupRestoreUser)
				}
			}
			checked++
		}
	}
	if checked < 2 { // infra/keda and infra/knative, at least
		t.Fatalf("checked %d purge containers; want those of the KEDA and the Knative manifests", checked)
	}
}
