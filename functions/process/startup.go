package process

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Startup times the phases of a process's start until its first event is acknowledged, and
// logs them in one line ("cold start"): what a scale from zero waits on beside scheduling and
// the image pull. The phases are the time since the previous mark; started_at is the
// process's own start, from which exec's share (the Go runtime's init) can be measured by
// whoever exec'd it.
type Startup struct {
	log   *zap.Logger
	begin time.Time
	// coldStart is set once, by Done: a series only in processes that settled an event.
	coldStart *prometheus.GaugeVec

	mu      sync.Mutex
	last    time.Time
	phases  []zap.Field
	done    bool
	settled chan struct{}
}

// newStartup times a start from now; reg (nil: none) gets the cold start's duration once Done.
func newStartup(log *zap.Logger, reg prometheus.Registerer) *Startup {
	now := time.Now()
	s := &Startup{log: log, begin: now, last: now, settled: make(chan struct{})}
	s.coldStart = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "housekeeper", Subsystem: "function", Name: "cold_start_seconds",
		Help: "Time from this process's start to its first event settled, set once (a scale from zero waits on it beside scheduling and the image pull); each process started is one series.",
	}, nil)
	if reg != nil {
		reg.MustRegister(s.coldStart)
	}
	return s
}

// Settled is closed by Done: once the first event is settled.
func (s *Startup) Settled() <-chan struct{} { return s.settled }

// Mark ends the phase called phase.
func (s *Startup) Mark(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	now := time.Now()
	s.phases = append(s.phases, zap.Duration(phase, now.Sub(s.last)))
	s.last = now
}

// Done logs the phases once; later calls do nothing.
func (s *Startup) Done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	close(s.settled)
	s.coldStart.WithLabelValues().Set(s.last.Sub(s.begin).Seconds())
	fields := append([]zap.Field{zap.Int64("started_at_unix_nano", s.begin.UnixNano()), zap.Duration("total", s.last.Sub(s.begin))}, s.phases...)
	s.log.Info("cold start", fields...)
}
