package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Inputs is what a cached artifact is built from: text (names, versions), source files (by
// content) and installed files (by size and modification time: a reinstalled tool changes
// both, and hashing hundreds of megabytes of binaries would cost what the cache saves).
type Inputs struct {
	Text []string
	// Sources are globs relative to the repository's root: a clone elsewhere has the same key.
	Sources   []string
	Installed []string
}

// Key digests the inputs.
func (in Inputs) Key() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range in.Text {
		fmt.Fprintf(h, "text %q\n", s)
	}
	for _, pattern := range in.Sources {
		sources, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return "", err
		}
		if len(sources) == 0 {
			return "", fmt.Errorf("no source matches %s in %s", pattern, root)
		}
		for _, src := range sources {
			data, err := os.ReadFile(src)
			if err != nil {
				return "", err
			}
			rel, err := filepath.Rel(root, src)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "source %s %x\n", filepath.ToSlash(rel), sha256.Sum256(data))
		}
	}
	for _, file := range in.Installed {
		fi, err := os.Stat(file)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "installed %s %d %d\n", file, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Cached returns the file of kind built from in: the one in the cache (CacheDir/kind) when its
// inputs are the same, or one build writes to the path it is given, then kept there in place of
// any older one. It reports whether the file came from the cache. For artifacts that take
// minutes to build from installed components and change only with them (images of the tools).
func Cached(kind string, in Inputs, build func(out string) error) (file string, hit bool, err error) {
	key, err := in.Key()
	if err != nil {
		return "", false, err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", false, err
	}
	dir := filepath.Join(cache, kind)
	file = filepath.Join(dir, key)
	if _, err := os.Stat(file); err == nil {
		return file, true, nil
	}
	tmp, err := os.MkdirTemp(cache, kind+"-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, key)
	if err := build(out); err != nil {
		return "", false, err
	}
	// Only the newest is kept: the others were built from inputs since changed.
	if err := os.RemoveAll(dir); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	return file, false, os.Rename(out, file)
}
