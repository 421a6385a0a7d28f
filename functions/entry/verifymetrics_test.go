package entry_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
)

// A purge process exports every verify outcome and result at zero before its first verify
// purge: the dashboard's panels have series to show, and increase() counts that first one.
func TestVerifyMetricsExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	entry.NewVerifyMetrics(reg)
	want := `
# HELP housekeeper_purge_verifications_total Verify purges of released entries' locked objects, by outcome (empty, still_locked, not_verifiable).
# TYPE housekeeper_purge_verifications_total counter
housekeeper_purge_verifications_total{outcome="empty"} 0
housekeeper_purge_verifications_total{outcome="not_verifiable"} 0
housekeeper_purge_verifications_total{outcome="still_locked"} 0
# HELP housekeeper_purge_verified_objects_total Objects verify purges found under released prefixes, by result (deleted, still_locked, unmarked: left alone).
# TYPE housekeeper_purge_verified_objects_total counter
housekeeper_purge_verified_objects_total{result="deleted"} 0
housekeeper_purge_verified_objects_total{result="still_locked"} 0
housekeeper_purge_verified_objects_total{result="unmarked"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
