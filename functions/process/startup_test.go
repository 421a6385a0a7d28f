package process

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestStartupLogsItsPhasesOnce(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	s := newStartup(zap.New(core), reg)
	if n, err := testutil.GatherAndCount(reg, "housekeeper_function_cold_start_seconds"); err != nil || n != 0 {
		t.Errorf("cold start gauge before Done: %d series (%v), want none", n, err)
	}
	s.Mark("kube_client")
	time.Sleep(5 * time.Millisecond)
	s.Mark("first_event_settled")
	select {
	case <-s.Settled():
		t.Fatal("Settled is closed before Done")
	default:
	}
	s.Done()
	select {
	case <-s.Settled():
	default:
		t.Fatal("Settled is not closed by Done")
	}
	s.Mark("later")
	s.Done()
	if n, err := testutil.GatherAndCount(reg, "housekeeper_function_cold_start_seconds"); err != nil || n != 1 {
		t.Errorf("cold start gauge after Done: %d series (%v), want 1", n, err)
	}
	entries := logs.FilterMessage("cold start").All()
	if len(entries) != 1 {
		t.Fatalf("%d cold start lines, want 1", len(entries))
	}
	fields := entries[0].ContextMap()
	for _, k := range []string{"started_at_unix_nano", "total", "kube_client", "first_event_settled"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("cold start lacks %s: %v", k, fields)
		}
	}
	if _, ok := fields["later"]; ok {
		t.Errorf("a phase marked after Done was logged: %v", fields)
	}
	if d := fields["first_event_settled"].(time.Duration); d < 5*time.Millisecond {
		t.Errorf("first_event_settled %s, want the 5 ms slept before it", d)
	}
	if total := fields["total"].(time.Duration); total < fields["first_event_settled"].(time.Duration) {
		t.Errorf("total %s is shorter than a phase", total)
	}
}
