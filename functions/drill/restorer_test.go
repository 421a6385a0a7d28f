package drill

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// A restorer gets the request and its share of memory as its Go soft limit, and nothing of the
// drill's own environment, where the function keeps its tokens.
func TestRestorerEnviron(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not for the restorer")
	req := restoreRequest{Snapshot: "/work/drill-1/full.db", DataDir: "/work/drill-1/data", Quota: 8 << 30, MaxRequest: 11 << 20}
	env := restorerEnviron(req, 65<<20)
	if !slices.Contains(env, "GOMEMLIMIT=68157440") || !slices.Contains(env, "TMPDIR=/work/drill-1") || len(env) != 3 {
		t.Errorf("environment %q: want the request, GOMEMLIMIT=68157440 and TMPDIR=/work/drill-1 only", env)
	}
	var got restoreRequest
	value, _ := strings.CutPrefix(env[0], restorerEnv+"=")
	if err := json.Unmarshal([]byte(value), &got); err != nil || got != req {
		t.Errorf("request %s (%v), want %+v", value, err, req)
	}
	if env := restorerEnviron(req, 0); slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "GOMEMLIMIT=") }) {
		t.Errorf("environment %q without a memory share: want no GOMEMLIMIT", env)
	}
}
