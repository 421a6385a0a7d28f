package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

// copy-binary copies a file, or the running binary, to --to as an executable, replacing what
// is there whole; without --to, or from what is not a regular file, it copies nothing.
func TestCopyBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tool")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"copy-binary"}, args...), &out, &errOut, providers.All...)
		return code, out.String() + errOut.String()
	}
	dst := filepath.Join(dir, "shared", "tool")
	if err := os.Mkdir(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("--from", src, "--to", dst); code != 0 {
		t.Fatalf("copy-binary --from --to: exit %d: %s", code, out)
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != "#!/bin/true\n" {
		t.Errorf("--to holds %q (%v), want the source", got, err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("--to: %v %v, want mode 0755", fi, err)
	}
	self := filepath.Join(dir, "shared", "housekeeper")
	if code, out := run("--to", self); code != 0 {
		t.Fatalf("copy-binary --to: exit %d: %s", code, out)
	}
	exe, _ := os.Executable()
	want, _ := os.ReadFile(exe)
	if got, err := os.ReadFile(self); err != nil || !bytes.Equal(got, want) {
		t.Errorf("without --from the copy is not this binary (%d bytes, want %d; %v)", len(got), len(want), err)
	}
	if code, _ := run("--from", src); code != 2 {
		t.Errorf("without --to: exit %d, want 2 (usage)", code)
	}
	if code, _ := run("--from", dir, "--to", filepath.Join(dir, "shared", "x")); code != 1 {
		t.Errorf("from a directory: exit %d, want 1", code)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 2 {
		t.Errorf("the shared directory holds %d files, want the two copies (no temporary file left)", len(entries))
	}
}
