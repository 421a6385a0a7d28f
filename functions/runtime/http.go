package runtime

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// HTTPHandler serves fn over CloudEvents HTTP (binary and structured mode), as Knative
// delivers events. Knative retries 5xx, 408 and 429 and gives up on other 4xx, so:
// success → 202, invalid or permanently failing event → 4xx with the reason, retryable
// failure → 503 (with Retry-After when the function asked for a delay).
func HTTPHandler(fn Function, reg prometheus.Registerer, log *zap.Logger) (http.Handler, error) {
	if err := fn.Validate(); err != nil {
		return nil, err
	}
	return &httpHandler{fn: fn, metrics: newMetrics(reg), log: log.With(zap.String("function", fn.Name)), objects: newKeyLock()}, nil
}

type httpHandler struct {
	fn      Function
	metrics *metrics
	log     *zap.Logger
	objects *keyLock
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a CloudEvent", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, events.MaxDataSize+16<<10)
	e, err := cehttp.NewEventFromHTTPRequest(r)
	if err != nil {
		h.reject(w, http.StatusBadRequest, fmt.Errorf("%w: not a CloudEvent: %v", events.ErrInvalidEvent, err))
		return
	}
	if err := events.Validate(*e); err != nil {
		h.reject(w, http.StatusBadRequest, err)
		return
	}
	if !h.fn.accepts(e.Type()) {
		h.reject(w, http.StatusBadRequest, fmt.Errorf("%w: function %s does not take %s", events.ErrUnknownType, h.fn.Name, e.Type()))
		return
	}
	log := h.log.With(zap.String("type", e.Type()), zap.String("id", e.ID()), zap.String("name", e.Subject()))

	unlock := h.objects.lock(objectKey(*e))
	h.metrics.inFlight.WithLabelValues(h.fn.Name).Inc()
	start := time.Now()
	ctx := r.Context()
	if fire, ok := fireFromHeaders(r.Header); ok {
		ctx = WithFire(ctx, fire) // from the forwarder: the schedule's fire, not this request's time
	}
	err = h.fn.Handler.Handle(ctx, *e)
	unlock()
	h.metrics.duration.WithLabelValues(h.fn.Name).Observe(time.Since(start).Seconds())
	h.metrics.inFlight.WithLabelValues(h.fn.Name).Dec()

	switch {
	case err == nil:
		h.metrics.handled.WithLabelValues(h.fn.Name, outcomeSuccess).Inc()
		w.WriteHeader(http.StatusAccepted)
	case ClassOf(err) == ClassWaiting:
		h.metrics.handled.WithLabelValues(h.fn.Name, outcomeWaiting).Inc()
		log.Info("waiting for another change", zap.Error(err))
		w.WriteHeader(http.StatusAccepted)
	case ClassOf(err) == ClassPermanent:
		h.metrics.failed.WithLabelValues(h.fn.Name, string(ClassPermanent)).Inc()
		h.metrics.handled.WithLabelValues(h.fn.Name, outcomeDeadLetter).Inc()
		log.Warn("permanent failure", zap.Error(err))
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
	default:
		h.metrics.failed.WithLabelValues(h.fn.Name, string(ClassRetryable)).Inc()
		h.metrics.handled.WithLabelValues(h.fn.Name, outcomeRetry).Inc()
		log.Info("retryable failure", zap.Error(err))
		if d := retryAfterOf(err); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(max(d.Seconds(), 1))))
		}
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	}
}

func (h *httpHandler) reject(w http.ResponseWriter, status int, err error) {
	h.metrics.failed.WithLabelValues(h.fn.Name, string(ClassPermanent)).Inc()
	h.metrics.handled.WithLabelValues(h.fn.Name, outcomeDeadLetter).Inc()
	h.log.Warn("rejected event", zap.Int("status", status), zap.Error(err))
	http.Error(w, err.Error(), status)
}
