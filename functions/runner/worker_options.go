package runner

import (
	"time"

	"go.uber.org/zap"
)

// WorkerOption configures a Worker.
type WorkerOption func(*workerOptions)

type workerOptions struct {
	concurrency   int
	backoffBase   time.Duration
	backoffMax    time.Duration
	retryBudget   time.Duration
	shutdownGrace time.Duration
	log           *zap.Logger
	startup       Startup
}

// workerOptionsOf are the defaults with opts applied.
func workerOptionsOf(opts []WorkerOption) workerOptions {
	o := workerOptions{
		concurrency:   4,
		backoffBase:   time.Second,
		backoffMax:    DefaultBackoffMax,
		retryBudget:   DefaultRetryBudget,
		shutdownGrace: 25 * time.Second,
		log:           zap.NewNop(),
		startup:       noStartup{},
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithConcurrency bounds the events handled at once (default 4).
func WithConcurrency(n int) WorkerOption { return func(o *workerOptions) { o.concurrency = max(n, 1) } }

// Defaults of the retries.
const (
	// DefaultBackoffMax caps the delay between two tries: a retry waiting for a dependency
	// runs at most this long after it is back.
	DefaultBackoffMax = 30 * time.Second
	// DefaultRetryBudget is how long an event is retried for failures of the function's own
	// (not a dependency's outage) before it is dead-lettered as transient, and re-driven.
	DefaultRetryBudget = time.Hour
)

// WithRetryBudget sets how long an event that keeps failing for a cause of the function's own
// is retried before it is dead-lettered (default DefaultRetryBudget). Outages never count.
func WithRetryBudget(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.retryBudget = d }
}

// WithBackoff sets the retry delay: base·2^(delivery-1), capped at max (default 1 s … 30 s).
func WithBackoff(base, max time.Duration) WorkerOption {
	return func(o *workerOptions) { o.backoffBase, o.backoffMax = base, max }
}

// WithShutdownGrace sets how long shutdown lets running handlers finish before cancelling
// them and handing their events back (default 25 s, inside Kubernetes' 30 s).
func WithShutdownGrace(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.shutdownGrace = d }
}

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) WorkerOption { return func(o *workerOptions) { o.log = l } }

// Startup is told the phases of a cold start: the consumer bound, the first event fetched, and
// Done once that event is settled (process.Startup logs them).
type Startup interface {
	Mark(phase string)
	Done()
}

type noStartup struct{}

func (noStartup) Mark(string) {}
func (noStartup) Done()       {}

// WithStartup reports the phases of the worker's start to s.
func WithStartup(s Startup) WorkerOption { return func(o *workerOptions) { o.startup = s } }
