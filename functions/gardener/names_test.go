package gardener

import (
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
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

// A function serving a type needs that type's provider linked into its binary, configured or
// not: an image for one cloud refuses another cloud's type at start.
func TestScopeLinks(t *testing.T) {
	s := Scope{Types: []string{"aws", "local"}, Classes: []string{"shoot"}}
	if err := s.Links(objectstore.Registry{"aws": nil, "local": nil}); err != nil {
		t.Errorf("both linked: %v", err)
	}
	err := s.Links(objectstore.Registry{"local": nil})
	if err == nil || !strings.Contains(err.Error(), `"aws"`) || !strings.Contains(err.Error(), "housekeeper-aws") {
		t.Errorf("aws not linked: %v, want an error naming aws and its image", err)
	}
}
