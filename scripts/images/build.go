package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// Source is the deployables' images' org.opencontainers.image.source.
const Source = "https://github.com/housekeeper-dev/housekeeper"

// BuildOptions are a Build's: `make images` and `make release` give the same ones for the same
// commit, tag and revision, and so get the same digests.
type BuildOptions struct {
	// Root is the module's root, where go build runs; default ModuleRoot().
	Root string
	// Arch is the binaries' and the images' GOARCH (GOOS is linux); default this machine's.
	Arch string
	// Version is the images' tag, their org.opencontainers.image.version (v<release>).
	Version string
	// Revision is their org.opencontainers.image.revision, the commit built.
	Revision string
	// Deployables are the images to build, each once.
	Deployables []Deployable
	// Created is the images' and every file's time; zero: Epoch().
	Created time.Time
	// Log receives progress, a line a call (without its newline); nil: none.
	Log func(format string, args ...any)
	// Check, when set, is called on each binary built, one after the other, before any image
	// is assembled; an error stops the Build.
	Check func(d Deployable, binary string) error
}

// Build builds the images of o.Deployables, keyed by their names: one go build of their main
// packages (they share most packages), static and trimmed, without VCS stamps — the revision
// is a label, and a dirty tree then gives the same binary as its commit would — then Binary on
// one shared Base, each image with the labels title (the name), description, source (Source),
// version and revision, and port 8080/tcp (Deployables).
func Build(ctx context.Context, o BuildOptions) (map[string]v1.Image, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if len(o.Deployables) == 0 {
		return nil, errors.New("no images to build")
	}
	if o.Root == "" {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		o.Root = root
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	created, err := orEpoch(o.Created)
	if err != nil {
		return nil, err
	}
	o.Created = created

	bin, err := os.MkdirTemp("", "housekeeper-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin + "/"}
	for _, d := range o.Deployables {
		args = append(args, d.Package)
	}
	logf("go build linux/%s: %s", o.Arch, strings.Join(Names(o.Deployables), ", "))
	t := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	logf("built in %s", since(t))

	binary := func(d Deployable) string { return filepath.Join(bin, filepath.Base(d.Package)) }
	if o.Check != nil {
		for _, d := range o.Deployables {
			if err := o.Check(d, binary(d)); err != nil {
				return nil, err
			}
		}
	}

	t = time.Now()
	base, err := Base(HostCACerts, o.Created)
	if err != nil {
		return nil, err
	}
	imgs := make([]v1.Image, len(o.Deployables))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, d := range o.Deployables {
		g.Go(func() error {
			img, err := Binary(gctx, Spec{
				Binary:  binary(d),
				Path:    d.Path,
				Ports:   []string{"8080/tcp"},
				Arch:    o.Arch,
				Created: o.Created,
				Base:    base,
				Labels: map[string]string{
					"org.opencontainers.image.title":       d.Name,
					"org.opencontainers.image.description": d.Description,
					"org.opencontainers.image.source":      Source,
					"org.opencontainers.image.version":     o.Version,
					"org.opencontainers.image.revision":    o.Revision,
				},
			})
			if err == nil {
				var size int64
				if size, err = Size(img); err == nil {
					logf("%s: assembled, %.1f MB compressed", d.Name, float64(size)/1e6)
				}
			}
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
	logf("%d images assembled in %s", len(imgs), since(t))
	out := make(map[string]v1.Image, len(imgs))
	for i, d := range o.Deployables {
		out[d.Name] = imgs[i]
	}
	return out, nil
}

// Size is what a registry stores of img: its layers compressed, its config and its manifest.
func Size(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}

// ModuleRoot is the directory of housekeeper's go.mod, at or above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module github.com/housekeeper-dev/housekeeper\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the housekeeper module: run from the repository")
		}
		dir = parent
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
