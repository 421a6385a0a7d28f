package gardener

import (
	"strings"
	"testing"
)

func TestEntryNamespace(t *testing.T) {
	for name, want := range map[string]string{
		"shoot--dev--app--6f1c2a":        "shoot--dev--app",
		"source-shoot--dev--app--6f1c2a": "shoot--dev--app",
		"shoot--dev--my--app--1":         "shoot--dev--my--app",
		"plain":                          "plain",
		"garden--2b7c4f0e":               "garden",      // gardener-operator's class-garden entry
		"kube-system--9d1e":              "kube-system", // a self-hosted shoot's (GEP-28)
	} {
		if got := EntryNamespace(name); got != want {
			t.Errorf("EntryNamespace(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestEntryPrefixNeverMatchesAnotherEntry(t *testing.T) {
	if got := EntryPrefix("source-shoot--a--b--1"); got != "shoot--a--b--1/" {
		t.Errorf("EntryPrefix(source-shoot--a--b--1) = %q", got)
	}
	if strings.HasPrefix("shoot--a--b--10/etcd-main/Full", EntryPrefix("shoot--a--b--1")) {
		t.Error("prefix of shoot--a--b--1 matches shoot--a--b--10's objects")
	}
}
