package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// serveOutcomes serves, in HTTP mode, a function whose result is named by the event's subject:
// permanent, retryable, unavailable, waiting, or anything else for success.
func serveOutcomes(t *testing.T) *httptest.Server {
	t.Helper()
	fn := Function{Name: "http-fn", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		switch e.Subject() {
		case "permanent":
			return Permanentf("bucket name is not a valid container name")
		case "retryable":
			return errors.New("the container lists blobs it just deleted")
		case "unavailable":
			return Retryable(fmt.Errorf("azure is throttling: %w", objectstore.ErrThrottled))
		case "waiting":
			return Waiting(errors.New("entries still use the bucket"))
		}
		return nil
	})}
	h, err := HTTPHandler(fn, prometheus.NewRegistry(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// The HTTP mode answers real HTTP requests as Knative expects: 2xx done, 4xx never retry,
// 5xx retry.
func TestHTTPModeStatusCodes(t *testing.T) {
	srv := serveOutcomes(t)

	binary := func(e cloudevents.Event) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(e.Data())))
		req.Header.Set("ce-specversion", e.SpecVersion())
		req.Header.Set("ce-id", e.ID())
		req.Header.Set("ce-source", e.Source())
		req.Header.Set("ce-type", e.Type())
		req.Header.Set("ce-subject", e.Subject())
		for k, v := range e.Extensions() {
			req.Header.Set("ce-"+k, v.(string))
		}
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	structured := func(e cloudevents.Event) *http.Request {
		body, _ := json.Marshal(e)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/cloudevents+json")
		return req
	}
	wrongType := bucketEvent(t, events.OpDeleted, "ok", 1)
	noSpec := binary(bucketEvent(t, events.OpCreated, "ok", 1))
	noSpec.Header.Del("ce-specversion")

	for _, tc := range []struct {
		name     string
		req      *http.Request
		status   int
		phrasing string
	}{
		{"binary success", binary(bucketEvent(t, events.OpCreated, "ok", 1)), 200, ""},
		{"structured success", structured(bucketEvent(t, events.OpCreated, "ok", 1)), 200, ""},
		{"waiting", binary(bucketEvent(t, events.OpCreated, "waiting", 1)), 202, ""},
		{"binary permanent", binary(bucketEvent(t, events.OpCreated, "permanent", 1)), 422, "not a valid container name"},
		{"structured retryable", structured(bucketEvent(t, events.OpCreated, "retryable", 1)), 500, "lists blobs"},
		{"binary retryable", binary(bucketEvent(t, events.OpCreated, "retryable", 1)), 500, "lists blobs"},
		{"unavailable", binary(bucketEvent(t, events.OpCreated, "unavailable", 1)), 503, "throttling"},
		{"type the function does not take", binary(wrongType), 400, "does not take " + events.TypeBucketDeleted},
		{"not a CloudEvent", noSpec, 400, "not a CloudEvent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.phrasing) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.phrasing)
			}
		})
	}
}

// In HTTP mode one port serves the events and the probes, as Knative wants.
func TestServeHTTPModeServesEventsAndProbesOnOnePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	handled := make(chan string, 1)
	fn := Function{Name: "served", Types: []string{events.TypeBucketCreated}, Handler: HandlerFunc(func(ctx context.Context, e cloudevents.Event) error {
		handled <- e.ID()
		return nil
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, fn, Serving{Mode: ModeHTTP, Addr: addr, Metrics: prometheus.NewRegistry(), Log: zaptest.NewLogger(t)})
	}()
	defer func() { cancel(); <-done }()

	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get("http://" + addr + "/healthz"); err == nil {
			break
		}
	}
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v", err)
	}
	resp.Body.Close()
	e := bucketEvent(t, events.OpCreated, "served", 1)
	body, _ := json.Marshal(e)
	resp, err = http.Post("http://"+addr+"/", "application/cloudevents+json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || <-handled != e.ID() {
		t.Errorf("POST / = %d", resp.StatusCode)
	}
	if _, err := ParseMode("push"); err == nil {
		t.Error("mode push accepted")
	}
}
