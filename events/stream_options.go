package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamOption configures the streams.
type StreamOption func(*streamOptions)

type streamOptions struct {
	maxAge           time.Duration
	deadLetterMaxAge time.Duration
	replicas         int
	auditReplicas    int
	storage          jetstream.StorageType
}

// WithMaxAge sets how long the stream of record keeps events (default 14 days): the window
// replay can reach back into.
func WithMaxAge(d time.Duration) StreamOption { return func(o *streamOptions) { o.maxAge = d } }

// WithDeadLetterMaxAge sets how long dead letters are kept (default 30 days).
func WithDeadLetterMaxAge(d time.Duration) StreamOption {
	return func(o *streamOptions) { o.deadLetterMaxAge = d }
}

// WithReplicas sets the replicas of the stream of record and the dead-letter stream (1 locally,
// 3 in production).
func WithReplicas(n int) StreamOption { return func(o *streamOptions) { o.replicas = n } }

// WithAuditReplicas sets the audit stream's replicas (default 1): its reports are what an
// operator reads, never what a function needs.
func WithAuditReplicas(n int) StreamOption { return func(o *streamOptions) { o.auditReplicas = n } }

// WithMemoryStorage keeps the streams in memory (benchmarks only: nothing survives a restart).
func WithMemoryStorage() StreamOption {
	return func(o *streamOptions) { o.storage = jetstream.MemoryStorage }
}
