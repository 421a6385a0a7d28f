package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations containerd names an imported image by: its own (the full reference, which
// `ctr images import` uses as is) and the OCI one (the tag, as `docker save` writes it).
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// dockerManifest is an entry of a Docker archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// blob is a file of blobs/sha256/ in the archive.
type blob struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

// WriteTarball writes imgs to one tar file at file that both `docker load` and containerd's
// `ctr -n k8s.io images import` (1.6 and later) read: an OCI image layout (oci-layout,
// index.json naming each image by the annotation io.containerd.image.name, blobs/sha256/) and,
// over the same blobs, Docker's manifest.json with RepoTags — the layout of `docker save`
// since Docker 25. containerd's importer prefers the OCI layout when oci-layout is present, so
// it keeps each image's manifest and digest, the registry's; from manifest.json alone (a
// Docker archive, ggcr's tarball.Write) it would write a manifest of its own, with another
// digest, and a pod asking for the image by digest would not find it. Docker reads
// manifest.json, and so does ggcr's tarball.ImageFromPath. Blobs shared by several images
// (the base layer) are written once; the archive's order and times are fixed, so the same
// images give the same bytes. file is replaced only once it is written whole.
func WriteTarball(ctx context.Context, file string, imgs map[name.Reference]v1.Image) error {
	if len(imgs) == 0 {
		return fmt.Errorf("tarball %s: no images", file)
	}
	refs := make([]name.Reference, 0, len(imgs))
	for ref := range imgs {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b name.Reference) int { return strings.Compare(a.Name(), b.Name()) })

	var (
		blobs   []blob
		seen    = map[v1.Hash]bool{}
		index   = v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
		dockers []dockerManifest
		byImage = map[v1.Hash]int{} // manifest digest → its entry in dockers
	)
	add := func(b blob) string {
		if !seen[b.digest] {
			seen[b.digest] = true
			blobs = append(blobs, b)
		}
		return "blobs/" + b.digest.Algorithm + "/" + b.digest.Hex
	}
	for _, ref := range refs {
		img := imgs[ref]
		desc, raw, err := manifestOf(img)
		if err != nil {
			return fmt.Errorf("tarball %s: image %s: %w", file, ref, err)
		}
		full := FullName(ref)
		desc.Annotations = map[string]string{annotationContainerdName: full}
		if tag, ok := ref.(name.Tag); ok {
			desc.Annotations[annotationRefName] = tag.TagStr()
		}
		index.Manifests = append(index.Manifests, desc)

		i, ok := byImage[desc.Digest]
		if !ok {
			entry, err := imageBlobs(img, add)
			if err != nil {
				return fmt.Errorf("tarball %s: image %s: %w", file, ref, err)
			}
			add(blob{digest: desc.Digest, size: desc.Size, open: bytesOpener(raw)})
			i = len(dockers)
			byImage[desc.Digest] = i
			dockers = append(dockers, entry)
		}
		if _, ok := ref.(name.Tag); ok {
			dockers[i].RepoTags = append(dockers[i].RepoTags, full)
		}
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	dockerJSON, err := json.Marshal(dockers)
	if err != nil {
		return err
	}

	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("tarball %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	bw := bufio.NewWriterSize(tmp, 1<<20)
	tw := tar.NewWriter(bw)
	if err := writeArchive(ctx, tw, blobs, indexJSON, dockerJSON); err != nil {
		tmp.Close()
		return fmt.Errorf("tarball %s: %w", file, err)
	}
	if err := tw.Close(); err != nil {
		tmp.Close()
		return fmt.Errorf("tarball %s: %w", file, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("tarball %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tarball %s: %w", file, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

func writeArchive(ctx context.Context, tw *tar.Writer, blobs []blob, indexJSON, dockerJSON []byte) error {
	modTime := time.Unix(0, 0)
	dirs := []string{"blobs/"}
	for _, b := range blobs {
		if d := "blobs/" + b.digest.Algorithm + "/"; !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: modTime}); err != nil {
			return err
		}
	}
	file := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: modTime}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: %d bytes, its descriptor says %d", name, n, size)
		}
		return err
	}
	if err := file("oci-layout", int64(len(`{"imageLayoutVersion":"1.0.0"}`)), strings.NewReader(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := b.open()
		if err != nil {
			return fmt.Errorf("blob %s: %w", b.digest, err)
		}
		err = file("blobs/"+b.digest.Algorithm+"/"+b.digest.Hex, b.size, r)
		r.Close()
		if err != nil {
			return err
		}
	}
	if err := file("index.json", int64(len(indexJSON)), bytes.NewReader(indexJSON)); err != nil {
		return err
	}
	return file("manifest.json", int64(len(dockerJSON)), bytes.NewReader(dockerJSON))
}

// manifestOf is img's descriptor in an index (with its platform, which containerd filters
// on) and its manifest.
func manifestOf(img v1.Image) (v1.Descriptor, []byte, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	desc := v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: digest}
	if p := cfg.Platform(); p != nil && p.OS != "" {
		desc.Platform = p
	}
	return desc, raw, nil
}

// imageBlobs adds img's config and layers, returning its manifest.json entry.
func imageBlobs(img v1.Image, add func(blob) string) (dockerManifest, error) {
	cfgName, err := img.ConfigName()
	if err != nil {
		return dockerManifest{}, err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return dockerManifest{}, err
	}
	entry := dockerManifest{Config: add(blob{digest: cfgName, size: int64(len(cfg)), open: bytesOpener(cfg)})}
	layers, err := img.Layers()
	if err != nil {
		return dockerManifest{}, err
	}
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return dockerManifest{}, err
		}
		size, err := l.Size()
		if err != nil {
			return dockerManifest{}, err
		}
		entry.Layers = append(entry.Layers, add(blob{digest: digest, size: size, open: l.Compressed}))
	}
	return entry, nil
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// FullName is ref as containerd and Docker name the image (`ctr images ls`, crictl, a pod's
// image: after normalizing): Docker Hub's registry is docker.io, where ggcr says
// index.docker.io, and its official images are under library/.
func FullName(ref name.Reference) string {
	repo := ref.Context()
	registry := repo.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	return registry + "/" + repo.RepositoryStr() + sep + ref.Identifier()
}
