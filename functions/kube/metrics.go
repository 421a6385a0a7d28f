package kube

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// RequestsMetric counts a process's Kubernetes API requests by verb (list: a get of a
// collection; watch counts the watches opened) and resource. The burst benchmark reads it.
const RequestsMetric = "housekeeper_kube_requests_total"

// Instrument makes cfg count its requests into reg and returns cfg.
func Instrument(cfg *rest.Config, reg prometheus.Registerer) *rest.Config {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RequestsMetric,
		Help: "Kubernetes API requests sent, by verb (list: a get of a collection) and resource.",
	}, []string{"verb", "resource"})
	reg.MustRegister(requests)
	return OnRequest(cfg, func(r *http.Request) { requests.WithLabelValues(Verb(r), Resource(r.URL.Path)).Inc() })
}

// OnRequest makes cfg call observe with every request it sends, and returns cfg.
func OnRequest(cfg *rest.Config, observe func(*http.Request)) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			observe(r)
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// OnResponse makes cfg call observe with the status (0 without a response) and error of every
// request it sends, and returns cfg.
func OnResponse(cfg *rest.Config, observe func(status int, err error)) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			observe(status, err)
			return resp, err
		})
	})
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Verb is the Kubernetes verb of an API request: get, list (a get of a collection), watch,
// create, update, patch or delete.
func Verb(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			return "watch"
		}
		if parts, ok := resourcePath(r.URL.Path); ok && len(parts) == 1 {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	default:
		return strings.ToLower(r.Method)
	}
}

// Resource is the resource (and subresource) an API path names: /api/v1/namespaces/x/secrets/y
// is "secrets", /apis/g/v/backupentries/x/status "backupentries/status". Anything else is
// "other", so the metric's labels stay few.
func Resource(path string) string {
	parts, ok := resourcePath(path)
	switch {
	case !ok:
		return "other"
	case len(parts) <= 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// resourcePath is what an API path names after its group, version and namespace: the resource,
// then the object's name and its subresource if any; false for anything else.
func resourcePath(path string) ([]string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return nil, false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:]
	}
	return parts, len(parts) > 0
}
