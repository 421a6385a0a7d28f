package all

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Every definition is complete and consistent: a unique name, known event types, publishes
// only what events defines, and builds (without a cluster it refuses if it publishes).
func TestDefinitions(t *testing.T) {
	if len(Functions) == 0 {
		t.Fatal("no functions registered")
	}
	seen := map[string]bool{}
	for _, def := range Functions {
		if def.Name == "" || seen[def.Name] {
			t.Errorf("name %q empty or registered twice", def.Name)
		}
		seen[def.Name] = true
		if err := def.Function(runner.HandlerFunc(nil)).Validate(); err != nil {
			t.Errorf("%s: %v", def.Name, err)
		}
		if def.Bind == nil {
			t.Errorf("%s: no Bind", def.Name)
			continue
		}
		_, err := def.Build(context.Background(), runner.Deps{})
		if def.Publishing() && err == nil {
			t.Errorf("%s publishes %v but built without a cluster and JetStream", def.Name, def.Publishes)
		}
		if l, ok := Lookup(def.Name); !ok || l.Name != def.Name {
			t.Errorf("Lookup(%s) = %v, %v", def.Name, l.Name, ok)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found a function that does not exist")
	}
	if got := Names(); !slices.IsSorted(got) || len(got) != len(Functions) {
		t.Errorf("Names() = %v", got)
	}
	// The groups partition the registry.
	var grouped []string
	for _, d := range slices.Concat(Gardener, EtcdBackup, Drill, Copy) {
		grouped = append(grouped, d.Name)
	}
	slices.Sort(grouped)
	if !slices.Equal(grouped, Names()) {
		t.Errorf("Gardener, EtcdBackup, Drill and Copy hold %v, the registry %v", grouped, Names())
	}
	// Every subject a function publishes on is one the stream of record holds, or the audit
	// stream: none is lost to a subject no stream stores.
	for _, def := range Functions {
		for _, s := range def.Publishes {
			root := events.SubjectAll
			if events.StreamOf(s) == events.AuditStream {
				root = events.SubjectAudit
			}
			if !strings.HasPrefix(s, strings.TrimSuffix(root, ">")) {
				t.Errorf("%s publishes on %q, outside %s and %s", def.Name, s, events.SubjectAll, events.SubjectAudit)
			}
		}
	}
}
