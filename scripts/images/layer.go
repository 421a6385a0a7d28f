package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer. A file's content is data, or src (a path on
// this machine) when it is too large to hold twice.
type entry struct {
	name     string // without a leading slash; a directory's without a trailing one
	dir      bool
	mode     int64 // permission bits, with 0o1000 for /tmp's sticky bit
	uid, gid int
	data     []byte
	src      string
}

// newLayer writes entries, in their order, as a gzip-compressed tar layer held in memory:
// only the compressed bytes are kept, and they are compressed once however often the
// layer is read (ggcr's tarball layers compress again on every read). Every header has
// modTime and no user or group names, so the same entries give the same digest.
func newLayer(entries []entry, modTime time.Time) (v1.Layer, error) {
	var gz bytes.Buffer
	compressed := sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(&gz, compressed), gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	uncompressed := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	for _, e := range entries {
		if err := writeEntry(tw, e, modTime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &memLayer{gz: gz.Bytes(), digest: sum(compressed), diffID: sum(uncompressed)}, nil
}

func writeEntry(tw *tar.Writer, e entry, modTime time.Time) error {
	hdr := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.gid,
		ModTime: modTime,
	}
	if e.dir {
		hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	if e.src == "" {
		hdr.Size = int64(len(e.data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Size = st.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if n, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copying %s into the layer: %w", e.src, err)
	} else if n != hdr.Size {
		return fmt.Errorf("copying %s into the layer: it changed size while being read (%d of %d bytes)", e.src, n, hdr.Size)
	}
	return nil
}

// parents are the directory entries above file (a path in the image), root-owned 0755, from
// the top down.
func parents(file string) []entry {
	var dirs []entry
	for dir := path.Dir(strings.TrimPrefix(path.Clean("/"+file), "/")); dir != "." && dir != "/"; dir = path.Dir(dir) {
		dirs = append(dirs, entry{name: dir, dir: true, mode: 0o755})
	}
	slices.Reverse(dirs)
	return dirs
}

func sum(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

// memLayer is a v1.Layer of gzip-compressed tar bytes in memory.
type memLayer struct {
	gz             []byte
	digest, diffID v1.Hash
}

func (l *memLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *memLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *memLayer) Size() (int64, error)     { return int64(len(l.gz)), nil }
func (l *memLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}
func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}
func (l *memLayer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.gz))
}
