package bridge

import (
	"time"

	"go.uber.org/zap"
)

// Options configure a Bridge.
type Options struct {
	// Cluster names the cluster in every event's source (not the API server's address).
	Cluster string
	// Types are the provider types handled (spec.type); empty means all.
	Types []string
	// Classes are the extension classes handled; an unset class means "shoot". Empty means
	// only "shoot".
	Classes []string
	// ResyncPeriod is how often every object is re-announced as synced (0: only at start).
	ResyncPeriod time.Duration
	// Workers publish concurrently, each waiting for its ack.
	Workers int
	// PublishTimeout bounds one publish attempt.
	PublishTimeout time.Duration
	// MaxRetryDelay caps the backoff between attempts for one object.
	MaxRetryDelay time.Duration
	// FlushTimeout bounds how long shutdown waits for the queue to drain.
	FlushTimeout time.Duration
	Logger       *zap.Logger
}

func (o *Options) defaults() {
	if len(o.Classes) == 0 {
		o.Classes = []string{"shoot"}
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 5 * time.Second
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 5 * time.Second
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}
