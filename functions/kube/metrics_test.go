package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

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

func TestVerb(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{http.MethodGet, "/api/v1/namespaces/garden/secrets/etcd-backup", "get"},
		{http.MethodGet, "/api/v1/namespaces/garden/secrets?fieldSelector=metadata.name%3Detcd-backup", "list"},
		{http.MethodGet, "/api/v1/namespaces/garden", "get"},
		{http.MethodGet, "/api/v1/namespaces", "list"},
		{http.MethodGet, "/apis/backup.housekeeper.dev/v1alpha1/backupcopypolicies", "list"},
		{http.MethodGet, "/apis/backup.housekeeper.dev/v1alpha1/backupcopypolicies/p", "get"},
		{http.MethodGet, "/apis/extensions.gardener.cloud/v1alpha1/backupentries/e1/status", "get"},
		{http.MethodGet, "/apis/extensions.gardener.cloud/v1alpha1/backupentries?watch=true&resourceVersion=7", "watch"},
		{http.MethodGet, "/api/v1/namespaces?watch=1", "watch"},
		{http.MethodGet, "/apis", "get"},
		{http.MethodGet, "/version", "get"},
		{http.MethodPost, "/api/v1/namespaces/garden/secrets", "create"},
		{http.MethodPut, "/api/v1/namespaces/garden/secrets/s", "update"},
		{http.MethodPatch, "/api/v1/namespaces/garden/secrets/s", "patch"},
		{http.MethodDelete, "/api/v1/namespaces/garden/secrets/s", "delete"},
	} {
		r := httptest.NewRequest(c.method, c.url, nil)
		if got := Verb(r); got != c.want {
			t.Errorf("Verb(%s %s) = %q, want %q", c.method, c.url, got, c.want)
		}
	}
}
