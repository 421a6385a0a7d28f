package drill

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Each drill's share of a run's memory budget, and the specs that leave a drill too little.
func TestMemoryShare(t *testing.T) {
	quantity := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	for _, tc := range []struct {
		name string
		spec backupv1alpha1.RestoreDrillSpec
		opts Options
		want int64
		err  string
	}{
		{name: "the defaults: 512Mi for one drill", want: 512 << 20},
		{name: "512Mi over 8", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 8}, want: 64 << 20},
		{name: "2Gi over 16", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 16, MemoryBudget: quantity("2Gi")}, want: 128 << 20},
		{name: "a budget in decimal units", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 3, MemoryBudget: quantity("1G")}, want: 333333333},
		{name: "the least budget the API admits, for one drill", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 1, MemoryBudget: quantity("64Mi")}, want: 64 << 20},
		{name: "512Mi over 16: says what would do", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 16}, want: 32 << 20,
			err: "memoryBudget 512Mi over concurrency 16 leaves each drill 32Mi, below the 64Mi a drill needs: raise memoryBudget to 1Gi or lower concurrency to 8"},
		{name: "a larger revision bound needs more", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: 8}, opts: Options{MaxRevisionBytes: 42 << 20}, want: 64 << 20,
			err: "leaves each drill 64Mi, below the 128Mi a drill needs: raise memoryBudget to 1Gi or lower concurrency to 4"},
		{name: "a budget below one drill's need", spec: backupv1alpha1.RestoreDrillSpec{MemoryBudget: quantity("10Mi")}, want: 10 << 20,
			err: "memoryBudget 10Mi is below the 64Mi one drill needs"},
		{name: "a negative concurrency", spec: backupv1alpha1.RestoreDrillSpec{Concurrency: -1}, err: "concurrency -1 is not positive"},
	} {
		got, err := MemoryShare(tc.spec, tc.opts)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
		if got != tc.want {
			t.Errorf("%s: a share of %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// The API's least memoryBudget is what one drill needs by default.
func TestMemoryNeedIsTheAPIsMinimum(t *testing.T) {
	if min := resource.MustParse(backupv1alpha1.MinDrillMemoryBudget); min.Value() != (Options{}).MemoryNeed() {
		t.Errorf("the API admits a memoryBudget of %s, a drill needs %d bytes", backupv1alpha1.MinDrillMemoryBudget, (Options{}).MemoryNeed())
	}
}

// A store's need grows with its keys from the floor, at the points test/bench/README.md measured.
func TestStoreNeed(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		keys int64
		want int64
	}{
		{keys: 0, want: 64 << 20},
		{keys: 31, want: 65 << 20}, // rounded up to a MiB
		{keys: 8192, want: 68 << 20},
		{keys: 131072, want: 128 << 20}, // ran as fast under GOMEMLIMIT=128MiB as without
		{opts: Options{MaxRevisionBytes: 42 << 20}, keys: 131072, want: 192 << 20},
	} {
		if got := tc.opts.storeNeed(tc.keys); got != tc.want {
			t.Errorf("%d keys with MaxRevisionBytes %d: %d bytes, want %d", tc.keys, tc.opts.MaxRevisionBytes, got, tc.want)
		}
	}
}
