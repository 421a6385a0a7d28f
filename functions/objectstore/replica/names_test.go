package replica

import "testing"

func TestNewer(t *testing.T) {
	const v2 = "shoot--dev--a/etcd-main/v2/"
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{v2 + "Incr-00000101-00000200-1700000300.gz", v2 + "Full-00000000-00000100-1700000000.gz", true},
		{v2 + "Full-00000000-00000200-1700000600", v2 + "Incr-00000101-00000200-1700000300.gz", true}, // same revision, later
		{v2 + "Full-00000000-00000100-1700009999", v2 + "Incr-00000101-00000200-1700000300.gz", false},
		{v2 + "Full-00000000-00000100-1700000000.final", v2 + "Full-00000000-00000099-1700000001", true},
		{v2 + "Full-00000000-00000100-1700000000", v2 + "Full-00000000-00000300-1700000000/0000000002", true}, // a chunk is no snapshot
		{"b/other", "a/other", true},
		{"a/other", v2 + "Full-00000000-00000001-1700000000", false},
	} {
		if got := Newer(tc.a, tc.b); got != tc.want {
			t.Errorf("Newer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if tc.a != tc.b && Newer(tc.b, tc.a) == tc.want {
			t.Errorf("Newer(%q, %q) agrees with its reverse", tc.b, tc.a)
		}
	}
}
