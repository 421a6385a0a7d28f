package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// source is the images' org.opencontainers.image.source, as make images labels them.
const source = "https://github.com/housekeeper-dev/housekeeper"

// buildImages builds ds as `make images` does (scripts/cmd/images): one go build of their main
// packages, static and trimmed, without VCS stamps, then images.Binary on one shared base with
// the same labels, so that `make images TAG=v<version>` of the same commit gives the same
// digests. When the binaries are for this machine, each is run with --version, which must
// print the release: what `housekeeper --version` says, the tag and the chart agree.
func buildImages(ctx context.Context, o *Options, ds []images.Deployable, created time.Time) (map[string]v1.Image, error) {
	bin, err := os.MkdirTemp("", "housekeeper-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)

	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin + "/"}
	var names []string
	for _, d := range ds {
		args = append(args, d.Package)
		names = append(names, d.Name)
	}
	o.logf("go build linux/%s: %s", o.Arch, strings.Join(names, ", "))
	t := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	o.logf("built in %s", since(t))

	binary := func(d images.Deployable) string { return filepath.Join(bin, filepath.Base(d.Package)) }
	if o.Arch == runtime.GOARCH && runtime.GOOS == "linux" {
		for _, d := range ds {
			out, err := exec.CommandContext(ctx, binary(d), "--version").Output()
			if err != nil {
				return nil, fmt.Errorf("%s --version: %w", d.Name, err)
			}
			fields := strings.Fields(string(out))
			if len(fields) != 2 || fields[1] != o.Version {
				return nil, fmt.Errorf("%s --version prints %q, not the release %s", d.Name, strings.TrimSpace(string(out)), o.Version)
			}
		}
		o.logf("every binary's --version says %s", o.Version)
	} else {
		o.logf("linux/%s binaries do not run here: --version not checked", o.Arch)
	}

	t = time.Now()
	base, err := images.Base(images.HostCACerts, created)
	if err != nil {
		return nil, err
	}
	imgs := make([]v1.Image, len(ds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, d := range ds {
		g.Go(func() error {
			img, err := images.Binary(gctx, images.Spec{
				Binary:  binary(d),
				Path:    d.Path,
				Ports:   []string{"8080/tcp"},
				Arch:    o.Arch,
				Created: created,
				Base:    base,
				Labels: map[string]string{
					"org.opencontainers.image.title":       d.Name,
					"org.opencontainers.image.description": d.Description,
					"org.opencontainers.image.source":      source,
					"org.opencontainers.image.version":     "v" + o.Version,
					"org.opencontainers.image.revision":    o.Revision,
				},
			})
			if err != nil {
				return fmt.Errorf("image %s: %w", d.Name, err)
			}
			imgs[i] = img
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var size int64
	for _, img := range imgs {
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		for _, l := range m.Layers {
			size += l.Size
		}
	}
	o.logf("%d images assembled (%.1f MB of layers) in %s", len(imgs), float64(size)/1e6, since(t))
	out := make(map[string]v1.Image, len(ds))
	for i, d := range ds {
		out[d.Name] = imgs[i]
	}
	return out, nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
