package bridge

import (
	"time"

	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// DefaultMaxInFlight is enough acks outstanding for JetStream's publish throughput, and few
// enough that an outage holds little in flight (the rest waits, coalesced, in the queue).
const DefaultMaxInFlight = 256

// DefaultRedriveAfter is how old a transient dead letter is before the bridge re-drives it: the
// retry budget behind it is spent already, so a minute only keeps a flapping cause from
// sending it round at once.
const DefaultRedriveAfter = time.Minute

// Options configure a Bridge.
type Options struct {
	// Cluster names the cluster in every event's source (not the API server's address).
	Cluster string
	// Scope is which BackupBuckets and BackupEntries the bridge announces (required).
	Scope gardener.Scope
	// ResyncPeriod is how often every object is re-announced as synced (0: only at start).
	ResyncPeriod time.Duration
	// MaxInFlight bounds the published events waiting for their ack at once.
	MaxInFlight int
	// PublishTimeout bounds one publish attempt.
	PublishTimeout time.Duration
	// MaxRetryDelay caps the backoff between attempts for one object.
	MaxRetryDelay time.Duration
	// FlushTimeout bounds how long shutdown waits for the queue to drain.
	FlushTimeout time.Duration
	// CRDPollInterval is how often the bridge looks for each of housekeeper's own kinds
	// (EtcdBackupConfig, RestoreDrill, BackupCopyPolicy) while the API server does not serve it.
	CRDPollInterval time.Duration
	// StateInterval is how often the leading bridge reads the dead letters and pending purges
	// NATS holds, for its metrics (RunState).
	StateInterval time.Duration
	// RedriveAfter is how old a transient dead letter is before the leading bridge re-drives it.
	RedriveAfter time.Duration
	// RecordDeletions publishes a deleted event when an object leaves the API server. No
	// function consumes it: it is a record only, three replicated messages per deleted entry
	// instead of two.
	RecordDeletions bool
	Logger          *zap.Logger
}

func (o *Options) defaults() {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
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
	if o.CRDPollInterval <= 0 {
		o.CRDPollInterval = time.Minute
	}
	if o.StateInterval <= 0 {
		o.StateInterval = DefaultStateInterval
	}
	if o.RedriveAfter <= 0 {
		o.RedriveAfter = DefaultRedriveAfter
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}
