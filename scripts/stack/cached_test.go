package stack

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCachedBuildsOnceForTheSameInputs(t *testing.T) {
	t.Setenv("HOUSEKEEPER_CACHE", t.TempDir())
	installed := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(installed, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	builds := 0
	build := func(out string) error {
		builds++
		return os.WriteFile(out, []byte("artifact"), 0o644)
	}
	in := Inputs{Text: []string{"image:1.0"}, Sources: []string{"scripts/stack/cached.go"}, Installed: []string{installed}}

	first, hit, err := Cached("kind", in, build)
	if err != nil || hit || builds != 1 {
		t.Fatalf("first: hit %v, %d builds, %v; want a build", hit, builds, err)
	}
	again, hit, err := Cached("kind", in, build)
	if err != nil || !hit || builds != 1 || again != first {
		t.Fatalf("again: %s hit %v, %d builds, %v; want %s from the cache", again, hit, builds, err, first)
	}

	// A reinstalled tool is a new input: built again, and only the newest is kept.
	if err := os.WriteFile(installed, []byte("v2, longer"), 0o755); err != nil {
		t.Fatal(err)
	}
	newer, hit, err := Cached("kind", in, build)
	if err != nil || hit || builds != 2 || newer == first {
		t.Fatalf("after a reinstall: %s hit %v, %d builds, %v; want a new build", newer, hit, builds, err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the artifact of the old inputs is still cached: %v", err)
	}
	if data, err := os.ReadFile(newer); err != nil || string(data) != "artifact" {
		t.Errorf("cached artifact: %q, %v", data, err)
	}

	in.Sources = []string{"no/such/*.go"}
	if _, _, err := Cached("kind", in, build); err == nil {
		t.Error("a source pattern that matches nothing is accepted")
	}
}
