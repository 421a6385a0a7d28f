// The copies of a purged entry's backups: every BackupDestination a BackupCopyPolicy copied
// them to is purged under the entry's prefix with the entry, before its bucket, and what
// object lock keeps there is deleted by the entry's verify purge when the locks end.

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

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Outcomes of the purge of an entry's copy in one BackupDestination.
const (
	CopyPurged = "purged" // nothing is left under the prefix
	// CopyLocked: purged but for objects object lock keeps, marked for deletion; the entry's
	// verify purge deletes them when their locks end.
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
//
// It returns what it purged in all of them together, and the destinations where object lock
// kept objects (the verify purge's, when their locks end).
func (p *Purger) purgeCopies(ctx context.Context, log *zap.Logger, be *extensionsv1alpha1.BackupEntry, prefix string) (Purged, []string, error) {
	copies, err := destination.CopiesOf(ctx, kube.CachedOrLive(p.Policies, p.Client), be)
	if err != nil {
		return Purged{}, nil, err
	}
	var (
		all    Purged
		locked []string
		failed []string
		first  error
	)
	for _, cp := range copies {
		log := log.With(zap.String("destination", cp.Destination), zap.Strings("policies", cp.Policies))
		outcome, purged, err := p.purgeCopy(ctx, log, cp.Destination, prefix, p.recheck(be))
		if errors.Is(err, gardener.ErrObjectChanged) {
			return Purged{}, nil, err
		}
		p.Copies.observe(cp.Destination, outcome)
		all = all.add(purged)
		if outcome == CopyLocked {
			locked = append(locked, cp.Destination)
		}
		if err != nil {
			log.Warn("copy not purged: the entry waits", zap.Error(err))
			failed = append(failed, cp.Destination)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return all, locked, nil
	}
	classified := gardener.Classify(first)
	if problem := (*destination.Problem)(nil); errors.As(first, &problem) {
		classified = gardener.Retryable(first, gardencorev1beta1.ErrorRetryableConfigurationProblem)
	}
	kind := "BackupDestination"
	if len(failed) > 1 {
		kind += "s"
	}
	return Purged{}, nil, runner.Unavailable(fmt.Errorf("the copies under %s in %s %s are not purged, so neither is the bucket: %w",
		prefix, kind, strings.Join(failed, ", "), classified))
}

// purgeCopy purges prefix in the named BackupDestination, rechecking the entry before each
// page (DeleteOptions.Recheck), and returns the outcome and what it purged.
func (p *Purger) purgeCopy(ctx context.Context, log *zap.Logger, name, prefix string, recheck func(context.Context) error) (string, Purged, error) {
	store, _, err := destination.Open(ctx, p.Client, p.Providers, name)
	switch {
	case errors.Is(err, destination.ErrNoDestination):
		log.Warn("not purging the copy: the BackupCopyPolicy names a BackupDestination that does not exist; what it held stays")
		return CopyLeft, Purged{}, nil
	case err != nil:
		return CopyFailed, Purged{}, fmt.Errorf("%s: %w", name, err)
	}
	purged, err := DeletePrefix(ctx, store, prefix, DeleteOptions{Retries: p.KeyRetries, Recheck: recheck})
	if err != nil {
		return CopyFailed, purged, fmt.Errorf("%s: %w", name, err)
	}
	if purged.Locked > 0 {
		log.Warn("copy purged but for objects object lock keeps: marked for deletion, the verify purge's when their locks end", zap.String("prefix", prefix),
			zap.Int("deleted", purged.Deleted), zap.Int("locked", purged.Locked), zap.Time("lockedUntil", purged.Until), zap.String("note", purged.Note))
		return CopyLocked, purged, nil
	}
	log.Info("copy purged", zap.String("prefix", prefix), zap.Int("deleted", purged.Deleted))
	return CopyPurged, purged, nil
}

// verifyCopies is the verify purge of the copies in data.LockedCopies: in each it deletes what
// is under the prefix and marked for deletion, and nothing else. It returns what it purged, the
// objects it left for carrying no mark, and the destinations still holding locked objects. A
// destination gone is left (what it held stays, as the purge leaves it); one it cannot reach
// fails the verify purge, which is retried.
func (p *Purger) verifyCopies(ctx context.Context, log *zap.Logger, data events.PurgeData) (Purged, int, []string, error) {
	var (
		all      Purged
		unmarked int
		locked   []string
	)
	for _, name := range data.LockedCopies {
		log := log.With(zap.String("destination", name))
		store, _, err := destination.Open(ctx, p.Client, p.Providers, name)
		switch {
		case errors.Is(err, destination.ErrNoDestination):
			log.Warn("not verifying the copy: the BackupDestination is gone; its marked objects stay")
			continue
		case err != nil:
			return Purged{}, 0, nil, fmt.Errorf("verify purge of the copy in BackupDestination %s: %w", name, err)
		}
		locking, ok := store.(objectstore.Locking)
		if !ok {
			log.Info("not verifying the copy: the store has no object lock")
			continue
		}
		purged, n, err := deleteMarked(ctx, store, locking, data.Prefix, p.KeyRetries)
		if err != nil {
			return Purged{}, 0, nil, fmt.Errorf("verify purge of the copy in BackupDestination %s: %w", name, err)
		}
		all, unmarked = all.add(purged), unmarked+n
		if purged.Locked > 0 {
			locked = append(locked, name)
		}
	}
	return all, unmarked, locked, nil
}
