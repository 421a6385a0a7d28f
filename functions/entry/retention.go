package entry

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// Annotations that set an entry's retention.
const (
	// AnnotationRetention overrides the retention of one entry (a Go duration, e.g. 72h).
	AnnotationRetention = "housekeeper.dev/retention"
	// AnnotationForceDeletion=true purges at once, as gardenlet's force-deletion does.
	AnnotationForceDeletion = "backupentry.core.gardener.cloud/force-deletion"
)

// Retention says how long a deleted entry's backups are kept before they are purged.
type Retention struct {
	// Default applies to every entry (default 0: gardenlet keeps its own grace period before it
	// deletes the extension object).
	Default time.Duration
	// ByPurpose overrides Default per shoot purpose.
	ByPurpose map[string]time.Duration
}

// Of returns the retention of e. A control-plane migration's source- entry has none: its
// backups were copied to the destination's bucket, and gardenlet waits for the cleanup. Then
// force-deletion (parsed as gardenlet parses it), the entry's annotation, its shoot purpose,
// and the default. A malformed annotation is an error that names it.
func (r Retention) Of(e *extensionsv1alpha1.BackupEntry) (time.Duration, error) {
	if gardener.IsSourceEntry(e.Name) {
		return 0, nil
	}
	if force, _ := strconv.ParseBool(e.Annotations[AnnotationForceDeletion]); force {
		return 0, nil
	}
	if v, ok := e.Annotations[AnnotationRetention]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("annotation %s=%q is not a non-negative duration such as 72h", AnnotationRetention, v)
		}
		return d, nil
	}
	if d, ok := r.ByPurpose[gardener.ShootPurpose(e)]; ok {
		return d, nil
	}
	return r.Default, nil
}

// Due returns when the backups of the deleting entry e may be purged.
func (r Retention) Due(e *extensionsv1alpha1.BackupEntry) (time.Time, error) {
	if e.DeletionTimestamp == nil {
		return time.Time{}, fmt.Errorf("BackupEntry %s is not being deleted", e.Name)
	}
	d, err := r.Of(e)
	if err != nil {
		return time.Time{}, err
	}
	return e.DeletionTimestamp.Add(d).UTC(), nil
}

// BindRetention registers the retention flags on fs: --retention, the default, and
// --retention-by-purpose, e.g. production=168h,evaluation=24h. The entry and the purge
// functions share them.
func BindRetention(fs *flag.FlagSet) *Retention {
	r := &Retention{ByPurpose: map[string]time.Duration{}}
	fs.DurationVar(&r.Default, "retention", 0, "how long a deleted BackupEntry's backups are kept before the purge")
	fs.Var((*byPurpose)(&r.ByPurpose), "retention-by-purpose", "retention per shoot purpose, e.g. production=168h,evaluation=24h")
	return r
}

// byPurpose is the flag value of Retention.ByPurpose: purpose=duration pairs, comma-separated.
type byPurpose map[string]time.Duration

func (b *byPurpose) String() string {
	if b == nil {
		return ""
	}
	pairs := make([]string, 0, len(*b))
	for _, purpose := range slices.Sorted(maps.Keys(*b)) {
		pairs = append(pairs, purpose+"="+(*b)[purpose].String())
	}
	return strings.Join(pairs, ",")
}

// Set replaces the map with the pairs of s and refuses a pair that is not purpose=duration.
func (b *byPurpose) Set(s string) error {
	m := map[string]time.Duration{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		purpose, d, ok := strings.Cut(kv, "=")
		dur, err := time.ParseDuration(d)
		if !ok || purpose == "" || err != nil || dur < 0 {
			return fmt.Errorf("%q: want purpose=duration, e.g. production=168h", kv)
		}
		m[purpose] = dur
	}
	*b = m
	return nil
}
