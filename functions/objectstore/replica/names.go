package replica

import (
	"path"
	"strconv"
	"strings"
)

// snapshotOf reads what orders etcd-backup-restore's snapshots from a key's last segment,
// <Full|Incr>-<start revision>-<last revision>-<unix time>[.<compression>][.final]: ok is false
// for any other key (a chunk, <name>/<chunk number>, among them).
func snapshotOf(key string) (last, unix int64, ok bool) {
	tokens := strings.Split(path.Base(key), "-")
	if len(tokens) != 4 || (tokens[0] != "Full" && tokens[0] != "Incr") {
		return 0, 0, false
	}
	last, err := strconv.ParseInt(tokens[2], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	unix, err = strconv.ParseInt(strings.SplitN(tokens[3], ".", 2)[0], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return last, unix, true
}

// Newer reports whether key a is newer than b: a snapshot is newer than any other object;
// snapshots are ordered by last revision, then time, as etcd-backup-restore's restore orders
// them; the rest by name.
func Newer(a, b string) bool {
	la, ua, oka := snapshotOf(a)
	lb, ub, okb := snapshotOf(b)
	switch {
	case oka != okb:
		return oka
	case oka && la != lb:
		return la > lb
	case oka && ua != ub:
		return ua > ub
	}
	return a > b
}
