package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "probe_total", Help: "probe"})
	reg.MustRegister(c)
	c.Inc()
	var notReady error = errors.New("informers not synced")
	srv := httptest.NewServer((&Server{Registry: reg, Ready: func() error { return notReady }}).Handler())
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "informers not synced") {
		t.Errorf("/readyz while not ready = %d %q", code, body)
	}
	notReady = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz when ready = %d", code)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "probe_total 1") {
		t.Errorf("/metrics lacks probe_total: %q", body)
	}
}
