package runner

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
// delivers events. The answer is the outcome table's status (outcome.go): 200 done, 202
// waiting, 500 retryable, 503 unavailable (both with Retry-After when the function asked for a
// delay), 422 permanent, and 400 for what is no event of the function's.
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

	class, settled := settle(err)
	if err != nil {
		h.metrics.failed.WithLabelValues(h.fn.Name, string(class)).Inc()
		level := zap.InfoLevel
		if settled.outcome == outcomeDeadLetter {
			level = zap.WarnLevel
		}
		log.Log(level, "handler failed", zap.String("class", string(class)), zap.String("outcome", settled.outcome), zap.Error(err))
	}
	h.metrics.handled.WithLabelValues(h.fn.Name, settled.outcome).Inc()
	if err == nil {
		w.WriteHeader(settled.status)
		return
	}
	if d := retryAfterOf(err); d > 0 && settled.outcome == outcomeRetry {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(d.Seconds(), 1))))
	}
	http.Error(w, err.Error(), settled.status)
}

func (h *httpHandler) reject(w http.ResponseWriter, status int, err error) {
	h.metrics.failed.WithLabelValues(h.fn.Name, string(ClassPermanent)).Inc()
	h.metrics.handled.WithLabelValues(h.fn.Name, outcomeDeadLetter).Inc()
	h.log.Warn("rejected event", zap.Int("status", status), zap.Error(err))
	http.Error(w, err.Error(), status)
}
