package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// runCopyBinary copies an executable file to --to (0755), --from or this binary itself: the
// step by which a pod's init containers hand a tool of one image to a container of another
// when the tool's image has no shell nor cp (distroless, as etcd-backup-restore's): the first,
// of housekeeper's image, copies housekeeper into a shared volume; the second, of the tool's
// image, runs that copy to copy the tool there (infra/chart: the drill's etcdbrctl).
func runCopyBinary(args []string, out io.Writer) error {
	fs := newFlags("copy-binary", "--to FILE [--from FILE]",
		"Copy an executable file to --to (mode 0755, replacing it atomically): --from, or this binary when --from is not given.")
	from := fs.String("from", "", "the file to copy (default: this binary)")
	to := fs.String("to", "", "where to copy it; its directory must exist")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *to == "" {
		return fmt.Errorf("%w: copy-binary needs --to", errUsage)
	}
	src := *from
	if src == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("copy-binary: finding this binary: %w", err)
		}
		src = self
	}
	if err := copyExecutable(src, *to); err != nil {
		return fmt.Errorf("copy-binary: %w", err)
	}
	fmt.Fprintf(out, "copied %s to %s\n", src, *to)
	return nil
}

// copyExecutable copies the regular file src to dst, 0755, through a temporary file beside dst
// renamed into place: a reader of dst never sees half a binary.
func copyExecutable(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := errors.Join(tmp.Chmod(0o755), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
