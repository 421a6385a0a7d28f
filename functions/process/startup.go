package process

import (
	"sync"
	"time"

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

	mu      sync.Mutex
	last    time.Time
	phases  []zap.Field
	done    bool
	settled chan struct{}
}

func newStartup(log *zap.Logger) *Startup {
	now := time.Now()
	return &Startup{log: log, begin: now, last: now, settled: make(chan struct{})}
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
	fields := append([]zap.Field{zap.Int64("started_at_unix_nano", s.begin.UnixNano()), zap.Duration("total", s.last.Sub(s.begin))}, s.phases...)
	s.log.Info("cold start", fields...)
}
