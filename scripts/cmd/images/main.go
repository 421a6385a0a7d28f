// Command images is `make images`: every deployable's OCI image built on this machine, with
// nothing pulled — the binaries with go build (static, trimmed), the images with package
// images — then written to one tarball (-o) for `ctr -n k8s.io images import` or `docker load`,
// or pushed (-push) to <registry>/<name>:<tag>.
//
//	go run ./scripts/cmd/images -o .local/images.tar
//	go run ./scripts/cmd/images -push -registry 127.0.0.1:5000/housekeeper-dev -tag dev -only housekeeper-bridge,housekeeper
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

const source = "https://github.com/housekeeper-dev/housekeeper"

type options struct {
	registry, tag, arch, out, only, revision string
	push                                     bool
}

func main() {
	var o options
	flag.StringVar(&o.registry, "registry", "ghcr.io/housekeeper-dev", `registry and path of the images: <registry>/<name>:<tag> ("" for bare names, e.g. housekeeper:local)`)
	flag.StringVar(&o.tag, "tag", "", "the images' tag (default v<appVersion> of infra/chart/Chart.yaml, the chart's default)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the binaries and the images (GOOS is linux)")
	flag.StringVar(&o.out, "o", "", "write the images to this tarball (for ctr images import, docker load)")
	flag.BoolVar(&o.push, "push", false, "push the images (credentials from the Docker config; plain HTTP to a loopback registry)")
	flag.StringVar(&o.only, "only", "", "build only these images, comma-separated (of "+strings.Join(names(images.Deployables()), ", ")+")")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (default: git rev-parse HEAD)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "[images] error:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Printf("[images] "+format+"\n", args...) }

func run(ctx context.Context, o options) error {
	start := time.Now()
	if o.out == "" && !o.push {
		return errors.New("nothing to do: give -o FILE (a tarball) or -push")
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	deployables, err := selected(o.only)
	if err != nil {
		return err
	}
	if o.tag == "" {
		if o.tag, err = chartTag(root); err != nil {
			return err
		}
	}
	if o.revision == "" {
		if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
			o.revision = strings.TrimSpace(string(out))
		}
	}
	refs := make([]name.Reference, len(deployables))
	for i, d := range deployables {
		s := d.Name + ":" + o.tag
		if o.registry != "" {
			s = strings.TrimSuffix(o.registry, "/") + "/" + s
		}
		if refs[i], err = images.ParseReference(s); err != nil {
			return err
		}
	}
	created, err := images.Epoch()
	if err != nil {
		return err
	}

	bin, err := os.MkdirTemp("", "housekeeper-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	if err := build(ctx, root, bin, o.arch, deployables); err != nil {
		return err
	}

	base, err := images.Base(images.HostCACerts, created)
	if err != nil {
		return err
	}
	imgs := make(map[name.Reference]v1.Image, len(deployables))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	t := time.Now()
	for i, d := range deployables {
		g.Go(func() error {
			img, err := images.Binary(gctx, images.Spec{
				Binary:  filepath.Join(bin, filepath.Base(d.Package)),
				Path:    d.Path,
				Ports:   []string{"8080/tcp"},
				Arch:    o.arch,
				Created: created,
				Base:    base,
				Labels: map[string]string{
					"org.opencontainers.image.title":       d.Name,
					"org.opencontainers.image.description": d.Description,
					"org.opencontainers.image.source":      source,
					"org.opencontainers.image.version":     o.tag,
					"org.opencontainers.image.revision":    o.revision,
				},
			})
			if err != nil {
				return fmt.Errorf("image %s: %w", d.Name, err)
			}
			size, err := imageSize(img)
			if err != nil {
				return fmt.Errorf("image %s: %w", d.Name, err)
			}
			logf("%s: assembled, %.1f MB compressed", d.Name, float64(size)/1e6)
			mu.Lock()
			imgs[refs[i]] = img
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	logf("%d images assembled in %s", len(imgs), since(t))

	if o.out != "" {
		t := time.Now()
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := images.WriteTarball(ctx, o.out, imgs); err != nil {
			return err
		}
		st, err := os.Stat(o.out)
		if err != nil {
			return err
		}
		logf("wrote %s (%.1f MB) in %s", o.out, float64(st.Size())/1e6, since(t))
	}
	if o.push {
		t := time.Now()
		logf("pushing %d images to %s", len(imgs), refs[0].Context().RegistryStr())
		if err := images.Push(ctx, imgs); err != nil {
			return err
		}
		logf("pushed in %s", since(t))
	}

	for i, d := range deployables {
		img := imgs[refs[i]]
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		size, err := imageSize(img)
		if err != nil {
			return err
		}
		logf("%-22s %s@%s  %.1f MB", d.Name, images.FullName(refs[i]), digest, float64(size)/1e6)
	}
	if o.out != "" {
		logf("load it: ctr -n k8s.io images import %s   or   docker load -i %s", o.out, o.out)
	}
	logf("done in %s", since(start))
	return nil
}

// build compiles every deployable's main package in one go build (they share most packages)
// static and trimmed, without VCS stamps: the revision is a label, and a dirty tree then
// gives the same binary as its commit would.
func build(ctx context.Context, root, dir, arch string, ds []images.Deployable) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", dir + "/"}
	for _, d := range ds {
		args = append(args, d.Package)
	}
	logf("go build linux/%s: %s", arch, strings.Join(names(ds), ", "))
	t := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	logf("built in %s", since(t))
	return nil
}

// imageSize is what a registry stores of img: its layers compressed, config and manifest.
func imageSize(img v1.Image) (int64, error) {
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

func selected(only string) ([]images.Deployable, error) {
	all := images.Deployables()
	if only == "" {
		return all, nil
	}
	var out []images.Deployable
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(d images.Deployable) bool { return d.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("-only: no image %q (there are %s)", n, strings.Join(names(all), ", "))
		}
		if !slices.ContainsFunc(out, func(d images.Deployable) bool { return d.Name == n }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

func names(ds []images.Deployable) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

// chartTag is the chart's default tag, v<appVersion> (infra/chart/templates/_helpers.tpl).
func chartTag(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "infra", "chart", "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("the default tag: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "appVersion:"); ok {
			if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
				return "v" + v, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the default tag: infra/chart/Chart.yaml has no appVersion; give -tag")
}

// moduleRoot is the directory of housekeeper's go.mod, at or above the working directory.
func moduleRoot() (string, error) {
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
