// The copies of a purged entry's backups: every BackupDestination a BackupCopyPolicy copied
// them to is purged under the entry's prefix with the entry, before its bucket.

package entry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Outcomes of the purge of an entry's copy in one BackupDestination.
const (
	CopyPurged = "purged" // nothing is left under the prefix
	// CopyLocked: purged but for objects object lock keeps, marked for deletion (by the
	// store's lifecycle rule); no verify purge follows them.
	CopyLocked = "locked"
	CopyFailed = "failed" // the destination refused or could not be reached: the entry waits
	// CopyLeft: the policy names a BackupDestination that does not exist: whatever it held
	// stays, and the entry does not wait for it.
	CopyLeft = "left"
)

// CopyMetrics counts the purges of entries' copies, by destination and outcome: a destination
// that keeps failing keeps its entries from being released.
type CopyMetrics struct {
	purges *prometheus.CounterVec
}

// NewCopyMetrics registers the metrics with reg (nil: unregistered); the entry and the purge
// function in one process share them.
func NewCopyMetrics(reg prometheus.Registerer) *CopyMetrics {
	m := &CopyMetrics{purges: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "housekeeper", Subsystem: "purge", Name: "copies_total",
		Help: "Purges of deleted entries' copies in BackupDestinations, by destination and outcome (purged, locked, failed: the entry waits, left: no such destination).",
	}, []string{"destination", "outcome"})}
	if reg != nil {
		m.purges = runner.Register(reg, m.purges)
	}
	return m
}

func (m *CopyMetrics) observe(destination, outcome string) {
	if m != nil {
		m.purges.WithLabelValues(destination, outcome).Inc()
	}
}

// purgeCopies deletes everything under prefix, the entry be's, in every BackupDestination that
// holds copies of be's backups (destination.CopiesOf), with the destination's credentials, as
// the bucket is purged: never outside the prefix, objects object lock keeps marked and left,
// until a listing finds nothing else there. It runs before the bucket's purge, and any copy it
// cannot purge fails the whole purge, the bucket untouched: the bucket is what
// etcd-backup-restore restores from and a control-plane migration reads, so a purge that stops
// half-way must leave it whole; a copy purged while the bucket is not is only a second copy
// gone early, of backups whose retention has ended. Every destination is tried, and the error
// names those that failed. It is retried as an outage is (runner.ClassUnavailable), never
// dead-lettered: a destination's refusal (wrong credentials) waits for an operator to fix it,
// and the purge goes on then.
func (p *Purger) purgeCopies(ctx context.Context, log *zap.Logger, be *extensionsv1alpha1.BackupEntry, prefix string) error {
	copies, err := destination.CopiesOf(ctx, p.Client, be)
	if err != nil {
		return err
	}
	var failed []string
	var first error
	for _, cp := range copies {
		log := log.With(zap.String("destination", cp.Destination), zap.Strings("policies", cp.Policies))
		outcome, err := p.purgeCopy(ctx, log, cp.Destination, prefix)
		p.Copies.observe(cp.Destination, outcome)
		if err != nil {
			log.Warn("copy not purged: the entry waits", zap.Error(err))
			failed = append(failed, cp.Destination)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	classified := gardener.Classify(first)
	if problem := (*destination.Problem)(nil); errors.As(first, &problem) {
		classified = gardener.Retryable(first, gardencorev1beta1.ErrorRetryableConfigurationProblem)
	}
	kind := "BackupDestination"
	if len(failed) > 1 {
		kind += "s"
	}
	return runner.Unavailable(fmt.Errorf("the copies under %s in %s %s are not purged, so neither is the bucket: %w",
		prefix, kind, strings.Join(failed, ", "), classified))
}

// purgeCopy purges prefix in the named BackupDestination and returns the outcome.
func (p *Purger) purgeCopy(ctx context.Context, log *zap.Logger, name, prefix string) (string, error) {
	store, _, err := destination.Open(ctx, p.Client, p.Providers, name)
	switch {
	case errors.Is(err, destination.ErrNoDestination):
		log.Warn("not purging the copy: the BackupCopyPolicy names a BackupDestination that does not exist; what it held stays")
		return CopyLeft, nil
	case err != nil:
		return CopyFailed, fmt.Errorf("%s: %w", name, err)
	}
	purged, err := DeletePrefix(ctx, store, prefix, p.KeyRetries, nil)
	if err != nil {
		return CopyFailed, fmt.Errorf("%s: %w", name, err)
	}
	if purged.Locked > 0 {
		log.Warn("copy purged but for objects object lock keeps: marked for deletion by the store's lifecycle rule", zap.String("prefix", prefix),
			zap.Int("deleted", purged.Deleted), zap.Int("locked", purged.Locked), zap.Time("lockedUntil", purged.Until), zap.String("note", purged.Note))
		return CopyLocked, nil
	}
	log.Info("copy purged", zap.String("prefix", prefix), zap.Int("deleted", purged.Deleted))
	return CopyPurged, nil
}
