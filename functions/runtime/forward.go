package runtime

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Forwarder is a Handler that delivers each event to a function served in HTTP mode (a
// Knative Service) and maps the answer back to the runtime's classes: 2xx done, 408, 429 and
// 5xx retried (honouring Retry-After), any other 4xx permanent with the function's reason. Run
// by a Worker, it gives HTTP-mode functions the pull mode's acks, backoff and dead letters.
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
	reason := strings.TrimSpace(string(body))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		err := fmt.Errorf("function at %s answered %d: %s", f.URL, code, reason)
		if s, convErr := strconv.Atoi(resp.Header.Get("Retry-After")); convErr == nil && s > 0 {
			return RetryAfter(time.Duration(s)*time.Second, err)
		}
		return err
	default:
		return Permanent(fmt.Errorf("function at %s answered %d: %s", f.URL, code, reason))
	}
}
