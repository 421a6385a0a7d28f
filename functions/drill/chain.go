package drill

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/destination"
)

// Snapshot kinds as etcd-backup-restore names them.
const (
	KindFull  = "Full"
	KindDelta = "Incr"
)

// finalSuffix marks the snapshot etcd-backup-restore takes when it shuts down.
const finalSuffix = ".final"

// Snapshot is what an object's key says about the snapshot in it.
type Snapshot struct {
	// Key is the object's key in the source.
	Key string
	// Kind is KindFull or KindDelta.
	Kind string
	// StartRevision and LastRevision are the revisions the snapshot covers: a full snapshot's
	// start is 0; a delta's start is the revision after the snapshot before it.
	StartRevision, LastRevision int64
	// CreatedOn is when etcd-backup-restore took it (whole seconds).
	CreatedOn time.Time
	// Compression is the compression suffix (".gz", ".zlib", ".Z"), "" for none.
	Compression string
	// Final marks a snapshot taken as etcd-backup-restore shut down.
	Final bool
}

func (s Snapshot) kindName() string {
	if s.Kind == KindFull {
		return "full snapshot"
	}
	return "delta"
}

// ParseSnapshot reads an object's key as etcd-backup-restore's ParseSnapshot does, for the
// objects its List returns: <…>/v2/<name> or <…>/v1/<directory>/<name>. ok is false for
// anything else — other objects, and the chunks of an unfinished multipart upload
// (<name>/<chunk>), which its restore skips.
func ParseSnapshot(key string) (s Snapshot, ok bool) {
	dir, name := path.Split(key)
	dirs := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	switch n := len(dirs); {
	case n >= 1 && dirs[n-1] == "v2":
	case n >= 2 && dirs[n-2] == "v1" && dirs[n-1] != "":
	default:
		return Snapshot{}, false
	}
	tokens := strings.Split(name, "-")
	if len(tokens) != 4 || (tokens[0] != KindFull && tokens[0] != KindDelta) {
		return Snapshot{}, false
	}
	start, err1 := strconv.ParseInt(tokens[1], 10, 64)
	last, err2 := strconv.ParseInt(tokens[2], 10, 64)
	if err1 != nil || err2 != nil || start > last {
		return Snapshot{}, false
	}
	// <unix time>[.<compression>][.final], read as etcd-backup-restore reads it.
	parts := strings.Split(tokens[3], ".")
	unix, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return Snapshot{}, false
	}
	s = Snapshot{Key: key, Kind: tokens[0], StartRevision: start, LastRevision: last, CreatedOn: time.Unix(unix, 0).UTC()}
	if len(parts) >= 2 {
		if "."+parts[1] != finalSuffix {
			s.Compression = "." + parts[1]
		}
		s.Final = "."+parts[len(parts)-1] == finalSuffix
	}
	return s, true
}

// Chain is what a restore applies: a full snapshot and the deltas after it, in order.
type Chain struct {
	Full   Snapshot
	Deltas []Snapshot
}

// Last is the newest snapshot of the chain: the point it restores to.
func (c Chain) Last() Snapshot {
	if len(c.Deltas) == 0 {
		return c.Full
	}
	return c.Deltas[len(c.Deltas)-1]
}

// LatestChain picks from keys (any order; keys that are no snapshot are ignored) the chain
// etcd-backup-restore's restore picks (miscellaneous.GetLatestFullSnapshotAndDeltaSnapList):
// snapshots ordered by last revision, then creation time; the last full snapshot in that order
// and every delta after it.
//
// It then checks the deltas' names follow on without a gap, which the snapshotter guarantees
// (a delta starts at the revision after the previous snapshot's last): a gap is ErrRevisionGap,
// and the chain is returned with the error. A delta may start inside the snapshot before it: the
// first one inside the full snapshot, whose name's revision is read before etcd takes the
// snapshot, so the db can be ahead of it; any other where two leaders' snapshotters both wrote
// deltas across a leader election (Chain.Overlapping, etcd-backup-restore#1043). The replay
// checks that the events such a delta shares with the store agree with it, and applies only
// the rest.
func LatestChain(keys []string) (Chain, error) {
	var snaps []Snapshot
	for _, k := range keys {
		if s, ok := ParseSnapshot(k); ok {
			snaps = append(snaps, s)
		}
	}
	slices.SortStableFunc(snaps, func(a, b Snapshot) int {
		if c := compareInt(a.LastRevision, b.LastRevision); c != 0 {
			return c
		}
		if c := a.CreatedOn.Compare(b.CreatedOn); c != 0 {
			return c
		}
		// etcd-backup-restore leaves such ties in any order; a full snapshot holds what a
		// delta ending at the same revision does, so it counts as the newer one.
		if a.Kind != b.Kind {
			if a.Kind == KindFull {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Key, b.Key)
	})
	full := -1
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i].Kind == KindFull {
			full = i
			break
		}
	}
	if full < 0 {
		return Chain{}, &Error{Err: ErrNoFullSnapshot, Detail: fmt.Sprintf("%d delta snapshots and no full one", len(snaps))}
	}
	c := Chain{Full: snaps[full], Deltas: snaps[full+1:]}
	prev := c.Full
	for _, d := range c.Deltas {
		if d.StartRevision > prev.LastRevision+1 {
			return c, d.fail(ErrRevisionGap, nil, "revisions %d..%d do not follow %d, the last of %s %s: revisions %d..%d are in no snapshot",
				d.StartRevision, d.LastRevision, prev.LastRevision, prev.kindName(), prev.Key, prev.LastRevision+1, d.StartRevision-1)
		}
		prev = d
	}
	return c, nil
}

// Overlapping are the deltas that start at or before the last revision of the delta before
// them: written by two leaders' snapshotters around a leader election.
func (c Chain) Overlapping() []Snapshot {
	var o []Snapshot
	for i := 1; i < len(c.Deltas); i++ {
		if c.Deltas[i].StartRevision <= c.Deltas[i-1].LastRevision {
			o = append(o, c.Deltas[i])
		}
	}
	return o
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Layout is how the backups under a prefix are named, and so which of them a restore takes.
type Layout int

const (
	// LayoutEtcdBackupRestore is etcd-backup-restore's (LatestChain): a BackupEntry's.
	LayoutEtcdBackupRestore Layout = iota
	// LayoutSnapshots is the snapshot function's (LatestBackup): an EtcdBackupConfig's.
	LayoutSnapshots
)

// latest is the chain a restore of the backups under prefix takes, from the keys listed there.
func (l Layout) latest(prefix string, keys []string) (Chain, error) {
	if l == LayoutSnapshots {
		return LatestBackup(prefix, keys)
	}
	return LatestChain(keys)
}

// LatestBackup picks from the keys under an EtcdBackupConfig's prefix its newest backup, as the
// snapshot function names them (<prefix><fire time>.db): etcd's snapshot db followed by its
// SHA-256, uncompressed, a chain of one full snapshot. Its revisions are not in its name: the
// restored db says them.
func LatestBackup(prefix string, keys []string) (Chain, error) {
	var newest Snapshot
	for _, k := range keys {
		if t, ok := destination.ConfigBackupTime(prefix, k); ok && (newest.Key == "" || t.After(newest.CreatedOn)) {
			newest = Snapshot{Key: k, Kind: KindFull, CreatedOn: t}
		}
	}
	if newest.Key == "" {
		return Chain{}, &Error{Err: ErrNoFullSnapshot, Detail: fmt.Sprintf("none of %d objects is a backup named <time>.db", len(keys))}
	}
	return Chain{Full: newest}, nil
}
