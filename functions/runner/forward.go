package runner

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Forwarder is a Handler that delivers each event to a function served in HTTP mode (a
// Knative Service) and maps the answer back to the runner's classes with the outcome table's
// inverse (classOfStatus), honouring Retry-After; a function it cannot reach is unavailable.
// Run by a Worker, it gives HTTP-mode functions the pull mode's acks, backoff and dead letters.
type Forwarder struct {
	URL    string
	Client *http.Client
}

// Handle POSTs e in binary mode.
func (f *Forwarder) Handle(ctx context.Context, e cloudevents.Event) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, nil)
	if err != nil {
		return Permanent(fmt.Errorf("forward URL %q: %w", f.URL, err))
	}
	if err := cehttp.WriteRequest(ctx, binding.ToMessage(&e), req); err != nil {
		return Permanent(fmt.Errorf("encoding the event for HTTP: %w", err))
	}
	if fire, ok := FireOf(ctx); ok {
		setFireHeaders(req.Header, fire)
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return fmt.Errorf("forwarding to %s: %w", f.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return errorOfAnswer(resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(body)), f.URL)
}
