package kube

import "testing"

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/garden/secrets/etcd-backup":                          "secrets",
		"/api/v1/namespaces/garden/secrets":                                      "secrets",
		"/api/v1/namespaces/garden":                                              "namespaces",
		"/api/v1/namespaces":                                                     "namespaces",
		"/apis/extensions.gardener.cloud/v1alpha1/backupentries/e1/status":       "backupentries/status",
		"/apis/extensions.gardener.cloud/v1alpha1/backupentries/e1":              "backupentries",
		"/apis/extensions.gardener.cloud/v1alpha1/backupentries":                 "backupentries",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/housekeeper": "leases",
		"/version": "other",
		"/apis":    "other",
		"/api/v1":  "other",
		"/healthz": "other",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}
