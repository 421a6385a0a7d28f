package logging

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestRouteLibrariesSendsKlogAndLogrToZap(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	RouteLibraries(zap.New(core))
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("informer synced", "resource", "backupentries")
	ctrllog.Log.Info("cache started", "kind", "BackupBucket")
	klog.Flush()

	got := map[string]string{}
	for _, e := range logs.All() {
		got[e.Message] = e.LoggerName
	}
	if got["informer synced"] != "klog" {
		t.Errorf("klog line not routed to zap under logger klog: %v", got)
	}
	if got["cache started"] != "controller-runtime" {
		t.Errorf("controller-runtime line not routed to zap under logger controller-runtime: %v", got)
	}
}

func TestNewRejectsUnknownLevelAndFormat(t *testing.T) {
	if _, err := New(Options{Level: "loud"}); err == nil {
		t.Error("level loud accepted")
	}
	if _, err := New(Options{Format: "xml"}); err == nil {
		t.Error("format xml accepted")
	}
	if _, err := New(Options{Level: "debug", Format: "console"}); err != nil {
		t.Errorf("debug/console: %v", err)
	}
}
