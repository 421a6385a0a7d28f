package events

import (
	"regexp"
	"strings"
	"testing"
	"testing/quick"
)

var idFormat = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestIDDeterministic(t *testing.T) {
	a := ID(testCluster, testEntryUID, "48213", "deleting")
	if b := ID(testCluster, testEntryUID, "48213", "deleting"); a != b {
		t.Errorf("same parts, different ids: %s, %s", a, b)
	}
	if !idFormat.MatchString(a) {
		t.Errorf("id %q is not 32 lower-case hex digits", a)
	}
	// Ids must not change between releases: a bridge restarted on a new version must still
	// produce the ids JetStream remembers. Pinned: the first 16 bytes of
	// sha256("garden-eu1\x00<uid>\x0048213\x00deleting\x00"), computed outside Go.
	if want := "765d53ebf8c8b56c753f9843da42f50f"; a != want {
		t.Errorf("ID = %s, want %s: the id algorithm changed", a, want)
	}
}

func TestIDDiffersWhenAnyPartDiffers(t *testing.T) {
	base := [4]string{testCluster, testEntryUID, "48213", "deleting"}
	id := func(p [4]string) string { return ID(p[0], p[1], p[2], p[3]) }
	for i := range base {
		for _, v := range []string{"", "x", base[i] + "x", base[(i+1)%4]} {
			p := base
			p[i] = v
			if id(p) == id(base) {
				t.Errorf("changing part %d to %q kept the id", i, v)
			}
		}
	}
}

// The separator keeps part boundaries: moving characters from one part to its neighbour
// changes the id.
func TestIDPartBoundaries(t *testing.T) {
	if ID("a", "bc", "", "") == ID("ab", "c", "", "") {
		t.Error(`("a","bc") and ("ab","c") share an id`)
	}
	for i := range 3 {
		p, q := [4]string{"x", "x", "x", "x"}, [4]string{"x", "x", "x", "x"}
		p[i], p[i+1] = "a", "bc"
		q[i], q[i+1] = "ab", "c"
		if ID(p[0], p[1], p[2], p[3]) == ID(q[0], q[1], q[2], q[3]) {
			t.Errorf("parts %d and %d: %q and %q share an id", i, i+1, p, q)
		}
	}
	if ID("", "", "", "a") == ID("a", "", "", "") || ID("", "", "", "") == ID("", "", "", "\x00") {
		t.Error("empty parts are not told apart")
	}
}

// Property: equal ids if and only if equal parts. (Parts are NUL-free: NUL is the separator,
// so ("a\x00", "b") and ("a", "\x00b") would collide. Cluster names, uids, resourceVersions
// and operations never contain NUL.)
func TestIDProperty(t *testing.T) {
	f := func(a, b [4]string) bool {
		for i := range a {
			a[i], b[i] = strings.ReplaceAll(a[i], "\x00", ""), strings.ReplaceAll(b[i], "\x00", "")
		}
		return (ID(a[0], a[1], a[2], a[3]) == ID(b[0], b[1], b[2], b[3])) == (a == b)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
	same := func(a [4]string) bool {
		first := ID(a[0], a[1], a[2], a[3])
		return ID(a[0], a[1], a[2], a[3]) == first
	}
	if err := quick.Check(same, nil); err != nil {
		t.Error(err)
	}
}
