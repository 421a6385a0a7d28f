package drill

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want Snapshot
		ok   bool
	}{
		{key: "e/etcd-main/v2/Full-00000000-00000042-1700000000.gz",
			want: Snapshot{Kind: KindFull, LastRevision: 42, CreatedOn: time.Unix(1700000000, 0).UTC(), Compression: ".gz"}, ok: true},
		{key: "e/etcd-main/v2/Incr-00000043-00000050-1700000060",
			want: Snapshot{Kind: KindDelta, StartRevision: 43, LastRevision: 50, CreatedOn: time.Unix(1700000060, 0).UTC()}, ok: true},
		{key: "e/etcd-main/v2/Full-00000000-00000050-1700000120.zlib.final",
			want: Snapshot{Kind: KindFull, LastRevision: 50, CreatedOn: time.Unix(1700000120, 0).UTC(), Compression: ".zlib", Final: true}, ok: true},
		{key: "e/etcd-main/v2/Full-00000000-00000050-1700000120.final",
			want: Snapshot{Kind: KindFull, LastRevision: 50, CreatedOn: time.Unix(1700000120, 0).UTC(), Final: true}, ok: true},
		{key: "v1/Backup-1500000000/Incr-00000007-00000009-1500000100.Z",
			want: Snapshot{Kind: KindDelta, StartRevision: 7, LastRevision: 9, CreatedOn: time.Unix(1500000100, 0).UTC(), Compression: ".Z"}, ok: true},
		// An unknown compression still names a snapshot: the restore fails on it, as etcd-backup-restore's does.
		{key: "v2/Full-00000000-00000001-1700000000.xz",
			want: Snapshot{Kind: KindFull, LastRevision: 1, CreatedOn: time.Unix(1700000000, 0).UTC(), Compression: ".xz"}, ok: true},
		{key: "e/etcd-main/v2/Full-00000000-00000042-1700000000.gz/0000000001"}, // a chunk of a multipart upload
		{key: "e/etcd-main/v2/Backup-1700000000/Full-00000000-00000042-1700000000"},
		{key: "e/etcd-main/Full-00000000-00000042-1700000000"}, // not under v1/ or v2/
		{key: "e/etcd-main/v2/Full-00000000-00000042"},
		{key: "e/etcd-main/v2/Snap-00000000-00000042-1700000000"},
		{key: "e/etcd-main/v2/Incr-00000050-00000042-1700000000"}, // start after last
		{key: "e/etcd-main/v2/Incr-x-00000042-1700000000"},
		{key: "e/etcd-main/v2/Incr-00000001-00000042-today"},
	} {
		got, ok := ParseSnapshot(tc.key)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.key, ok, tc.ok)
			continue
		}
		if ok {
			tc.want.Key = tc.key
			if got != tc.want {
				t.Errorf("%s: %+v, want %+v", tc.key, got, tc.want)
			}
		}
	}
}

func TestLatestChain(t *testing.T) {
	const p = "shoot--a--b/etcd-main/v2/"
	for _, tc := range []struct {
		name   string
		keys   []string
		full   string
		deltas []string
		err    error
		// words the error must name
		says []string
		// the deltas Overlapping returns
		overlapping []string
	}{{
		name: "full and contiguous deltas, listed in any order, among other objects",
		keys: []string{
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000151-00000151-1700000400.gz",
			"shoot--a--b/etcd-main/other",
			p + "Full-00000000-00000100-1700000000.gz/0000000001",
			p + "Incr-00000151-00000200-1700000400.gz/0000000002",
			p + "Incr-00000152-00000200-1700000500.gz",
		},
		full:   p + "Full-00000000-00000100-1700000000.gz",
		deltas: []string{p + "Incr-00000101-00000150-1700000300.gz", p + "Incr-00000151-00000151-1700000400.gz", p + "Incr-00000152-00000200-1700000500.gz"},
	}, {
		name: "the latest full snapshot, not the deltas before it",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Full-00000000-00000160-1700000360.gz",
			p + "Incr-00000161-00000170-1700000420.gz",
		},
		full:   p + "Full-00000000-00000160-1700000360.gz",
		deltas: []string{p + "Incr-00000161-00000170-1700000420.gz"},
	}, {
		name: "a full snapshot alone",
		keys: []string{p + "Full-00000000-00000100-1700000000"},
		full: p + "Full-00000000-00000100-1700000000",
	}, {
		name: "a final full snapshot at the same revision as the delta before it is the newer one",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Full-00000000-00000150-1700000300.gz.final",
		},
		full: p + "Full-00000000-00000150-1700000300.gz.final",
	}, {
		name: "a delta taken after a full snapshot at the same revision follows it",
		keys: []string{
			p + "Full-00000000-00000150-1700000300.gz",
			p + "Incr-00000151-00000150-1700000360.gz", // not a valid name: start after last
			p + "Incr-00000101-00000150-1700000360.gz",
		},
		full:   p + "Full-00000000-00000150-1700000300.gz",
		deltas: []string{p + "Incr-00000101-00000150-1700000360.gz"},
	}, {
		name: "the first delta may start inside the full snapshot, whose db can be ahead of its name",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000095-00000150-1700000300.gz",
		},
		full:   p + "Full-00000000-00000100-1700000000.gz",
		deltas: []string{p + "Incr-00000095-00000150-1700000300.gz"},
	}, {
		name: "v1 layout with snapshot directories",
		keys: []string{
			"e/v1/Backup-1500000000/Full-00000000-00000010-1500000000",
			"e/v1/Backup-1500000000/Incr-00000011-00000012-1500000060",
		},
		full:   "e/v1/Backup-1500000000/Full-00000000-00000010-1500000000",
		deltas: []string{"e/v1/Backup-1500000000/Incr-00000011-00000012-1500000060"},
	}, {
		name: "no full snapshot",
		keys: []string{p + "Incr-00000101-00000150-1700000300.gz", p + "Full-00000000-00000100-1700000000.gz/0000000001"},
		err:  ErrNoFullSnapshot,
		says: []string{"1 delta snapshots and no full one"},
	}, {
		name: "nothing at all",
		err:  ErrNoFullSnapshot,
	}, {
		name: "a delta missing in the middle",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Incr-00000201-00000250-1700000500.gz",
			p + "Incr-00000251-00000260-1700000600.gz",
		},
		full:   p + "Full-00000000-00000100-1700000000.gz",
		deltas: []string{p + "Incr-00000101-00000150-1700000300.gz", p + "Incr-00000201-00000250-1700000500.gz", p + "Incr-00000251-00000260-1700000600.gz"},
		err:    ErrRevisionGap,
		says: []string{"delta " + p + "Incr-00000201-00000250-1700000500.gz", "revisions 201..250 do not follow 150",
			"delta " + p + "Incr-00000101-00000150-1700000300.gz", "revisions 151..200 are in no snapshot"},
	}, {
		name: "the first delta missing",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000151-00000200-1700000500.gz",
		},
		full:   p + "Full-00000000-00000100-1700000000.gz",
		deltas: []string{p + "Incr-00000151-00000200-1700000500.gz"},
		err:    ErrRevisionGap,
		says:   []string{"do not follow 100, the last of full snapshot " + p + "Full-00000000-00000100-1700000000.gz"},
	}, {
		name: "overlapping deltas",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Incr-00000140-00000160-1700000400.gz",
		},
		full:        p + "Full-00000000-00000100-1700000000.gz",
		deltas:      []string{p + "Incr-00000101-00000150-1700000300.gz", p + "Incr-00000140-00000160-1700000400.gz"},
		overlapping: []string{p + "Incr-00000140-00000160-1700000400.gz"},
	}, {
		name: "two leaders' deltas from one revision, and on",
		keys: []string{
			p + "Full-00000000-00000100-1700000000.gz",
			p + "Incr-00000101-00000150-1700000300.gz",
			p + "Incr-00000101-00000163-1700000301.gz",
			p + "Incr-00000164-00000170-1700000400.gz",
		},
		full: p + "Full-00000000-00000100-1700000000.gz",
		deltas: []string{p + "Incr-00000101-00000150-1700000300.gz", p + "Incr-00000101-00000163-1700000301.gz",
			p + "Incr-00000164-00000170-1700000400.gz"},
		overlapping: []string{p + "Incr-00000101-00000163-1700000301.gz"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LatestChain(tc.keys)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var deltas []string
			for _, d := range c.Deltas {
				deltas = append(deltas, d.Key)
			}
			if c.Full.Key != tc.full || !slices.Equal(deltas, tc.deltas) {
				t.Errorf("chain %s + %v, want %s + %v", c.Full.Key, deltas, tc.full, tc.deltas)
			}
			var overlapping []string
			for _, d := range c.Overlapping() {
				overlapping = append(overlapping, d.Key)
			}
			if !slices.Equal(overlapping, tc.overlapping) {
				t.Errorf("overlapping deltas %v, want %v", overlapping, tc.overlapping)
			}
		})
	}
}

// The snapshot function's layout: the newest backup named <fire time>.db under the config's
// prefix is the chain; other objects, and other configs' backups, are not.
func TestLatestBackup(t *testing.T) {
	const prefix = "team/main/"
	keys := []string{
		prefix + "20261126T030000Z.db",
		prefix + "20261127T030000Z.db",
		prefix + "20261127T030000Z.db.partial",
		prefix + "notes.txt",
		"team/main-2/20261128T030000Z.db",
		prefix + "20261125T030000Z.db",
	}
	c, err := LatestBackup(prefix, keys)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	if c.Full.Key != prefix+"20261127T030000Z.db" || c.Full.Kind != KindFull || !c.Full.CreatedOn.Equal(want) || len(c.Deltas) != 0 || c.Last() != c.Full {
		t.Errorf("chain %+v, want the full snapshot %s20261127T030000Z.db of %s alone", c, prefix, want)
	}
	_, err = LatestBackup(prefix, keys[2:4])
	if !errors.Is(err, ErrNoFullSnapshot) || !strings.Contains(err.Error(), "none of 2 objects is a backup named <time>.db") {
		t.Errorf("no backups: %v, want ErrNoFullSnapshot counting the objects", err)
	}
}
