// Command images is `make images`: every deployable's OCI image built on this machine, with
// nothing pulled — the binaries and the images built by images.Build, as `make release` builds
// them — then written to one tarball (-o) for `ctr -n k8s.io images import` or `docker load`,
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
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

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
	flag.StringVar(&o.only, "only", "", "build only these images, comma-separated (of "+strings.Join(images.Names(images.Deployables()), ", ")+")")
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
	root, err := images.ModuleRoot()
	if err != nil {
		return err
	}
	var only []string
	if o.only != "" {
		for _, n := range strings.Split(o.only, ",") {
			only = append(only, strings.TrimSpace(n))
		}
	}
	deployables, err := images.Select(only...)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
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
	built, err := images.Build(ctx, images.BuildOptions{
		Root:        root,
		Arch:        o.arch,
		Version:     o.tag,
		Revision:    o.revision,
		Deployables: deployables,
		Log:         logf,
	})
	if err != nil {
		return err
	}
	imgs := make(map[name.Reference]v1.Image, len(built))
	for i, d := range deployables {
		imgs[refs[i]] = built[d.Name]
	}

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
		size, err := images.Size(img)
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

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
