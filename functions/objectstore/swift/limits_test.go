package swift

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
)

func TestReadBulkLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   int
	}{
		{"lower limit", 200, `{"swift":{"version":"2.30.1"},"bulk_delete":{"max_deletes_per_request":100,"max_failed_deletes":1000}}`, 100},
		{"Swift's defaults", 200, `{"swift":{"version":"2.30.1"},"bulk_delete":{"max_deletes_per_request":10000,"max_failed_deletes":1000}}`, 1000},
		{"fewer failures allowed", 200, `{"swift":{},"bulk_delete":{"max_deletes_per_request":10000,"max_failed_deletes":50}}`, 50},
		{"no numbers", 200, `{"swift":{},"bulk_delete":{}}`, 1000},
		{"no bulk delete", 200, `{"swift":{"version":"2.30.1"},"slo":{}}`, 0},
		{"not Swift's answer", 200, `{"status":"ok"}`, 1000},
		{"not JSON", 200, `<html>hello</html>`, 1000},
		{"numbers as strings", 200, `{"swift":{},"bulk_delete":{"max_deletes_per_request":"100"}}`, 1000},
		{"hidden", 403, ``, 1000},
		{"unknown", 404, ``, 1000},
		{"failing", 503, ``, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/info" || r.Header.Get("X-Auth-Token") != "" {
					t.Errorf("%s %s with a token: %v; want /info without", r.Method, r.URL.Path, r.Header.Get("X-Auth-Token") != "")
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			if got := readBulkLimit(t.Context(), srv.Client(), srv.URL+"/v1/AUTH_abc/", MaxBulkDelete); got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		if got := readBulkLimit(t.Context(), srv.Client(), srv.URL+"/v1/AUTH_abc/", MaxBulkDelete); got != MaxBulkDelete {
			t.Errorf("limit %d, want %d", got, MaxBulkDelete)
		}
	})
}

func TestInfoURL(t *testing.T) {
	for endpoint, want := range map[string]string{
		"http://127.0.0.1:8080/v1/AUTH_abc/":               "http://127.0.0.1:8080/info",
		"https://swift.example.com/v1/AUTH_abc":            "https://swift.example.com/info",
		"https://cloud.example.com/object-store/v1/AUTH_x": "https://cloud.example.com/object-store/info",
		"https://rgw.example.com/swift/v1/":                "https://rgw.example.com/swift/info",
		"https://swift.example.com/":                       "https://swift.example.com/info",
	} {
		if got := infoURL(endpoint); got != want {
			t.Errorf("infoURL(%q) = %q, want %q", endpoint, got, want)
		}
	}
}

func TestRefusedMax(t *testing.T) {
	for _, tc := range []struct {
		status, body string
		want         int
	}{
		{"413 Request Entity Too Large", "Maximum Bulk Deletes: 100 per request", 100},
		{"413 Request Entity Too Large", "<html><h1>Request Entity Too Large</h1><p>Maximum Bulk Deletes: 7 per request</p></html>", 7},
		{"413 Request Entity Too Large", "too large", 0},
		{"400 Bad Request", "Maximum Bulk Deletes: 100 per request", 0},
	} {
		if got := refusedMax(tc.status, tc.body); got != tc.want {
			t.Errorf("refusedMax(%q, %q) = %d, want %d", tc.status, tc.body, got, tc.want)
		}
	}
}

// A bulk delete that met max_failed_deletes stops: the names after the failures are not
// answered for, and are reported failed rather than deleted.
func TestBulkDeleteStoppedReportsTheRestFailed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("bulk-delete") {
			t.Errorf("%s %s, want a bulk delete", r.Method, r.URL)
		}
		fmt.Fprint(w, `{"Response Status":"400 Bad Request","Response Body":"Max delete failures exceeded","Number Deleted":1,`+
			`"Number Not Found":1,"Errors":[["/c/a","409 Conflict"],["/c/b","409 Conflict"]]}`)
	}))
	defer srv.Close()
	s := &store{name: "c", http: srv.Client(), opts: options{batchSize: MaxBulkDelete}}
	s.client = &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/v1/AUTH_x/"}
	failed, notFound, err := s.bulkDelete(t.Context(), []string{"a", "b", "c", "d", "e", "f"})
	if err != nil || !notFound {
		t.Fatalf("bulkDelete: notFound=%v err=%v", notFound, err)
	}
	if got := slices.Sorted(maps.Keys(failed)); !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f"}) {
		t.Errorf("failed %q, want every key: two refused, four not answered for", got)
	}
	if !errors.Is(failed["c"], errBulkStopped) || errors.Is(failed["a"], errBulkStopped) {
		t.Errorf("failed[a] = %v, failed[c] = %v; want a conflict and a stopped bulk delete", failed["a"], failed["c"])
	}
}
