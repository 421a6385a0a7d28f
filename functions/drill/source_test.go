package drill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDir(t *testing.T) {
	root := t.TempDir()
	for _, k := range []string{"e/v2/Full-1", "e/v2/Incr-2", "e/v2-old/x", "e/v2/Full-1.gz/0001", "e-other/v2/Full-9", "f/v2/Full-3"} {
		p := filepath.Join(root, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string) []string {
		t.Helper()
		var keys []string
		if err := Dir(root).List(context.Background(), prefix, func(page []string) error {
			if len(page) == 0 {
				t.Error("an empty page")
			}
			keys = append(keys, page...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	for prefix, want := range map[string][]string{
		// A plain string prefix, in lexical order across directories ("e/v2-old" before "e/v2/").
		"e/v2":      {"e/v2-old/x", "e/v2/Full-1", "e/v2/Full-1.gz/0001", "e/v2/Incr-2"},
		"e/v2/":     {"e/v2/Full-1", "e/v2/Full-1.gz/0001", "e/v2/Incr-2"},
		"e/v2/Full": {"e/v2/Full-1", "e/v2/Full-1.gz/0001"},
		"e":         {"e-other/v2/Full-9", "e/v2-old/x", "e/v2/Full-1", "e/v2/Full-1.gz/0001", "e/v2/Incr-2"},
		"missing/":  nil,
	} {
		if got := list(prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	rc, err := Dir(root).Open(context.Background(), "e/v2/Incr-2")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for _, key := range []string{"../etc/passwd", "/e/v2/Incr-2", "e/v2/missing"} {
		if rc, err := Dir(root).Open(context.Background(), key); err == nil {
			rc.Close()
			t.Errorf("Open(%q) succeeded", key)
		}
	}
	stop := errors.New("stop")
	if err := Dir(root).List(context.Background(), "", func([]string) error { return stop }); err != stop {
		t.Errorf("List returned %v, not its callback's error", err)
	}
}
