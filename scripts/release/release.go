// Package release is `make release`: one version of housekeeper published to an OCI registry
// and registered for Gardener. It builds the images as `make images` does (package images:
// Deployables, Build, Push), packages the chart (infra/chart's Archive) as the OCI artifact
// `helm push` makes, pushes both, and writes the garden's registration for that registry —
// infra/gardener/controller-registration.yaml's with the chart's reference pinned by digest
// and the images by digest — once with the chart in the registry and once inline — and
// gardener-operator's Extension, infra/gardener/extension.yaml's pinned the same way. It then
// checks what it wrote against the registry (Verify) before saying it is done.
//
//	res, err := release.Run(ctx, release.Options{Version: "0.1.0", Registry: "ghcr.io/housekeeper-dev", OutDir: ".local/release"})
//
// A release is of the version the tree says (CheckVersion): nothing is stamped.
package release

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// Options are a release's.
type Options struct {
	// Version is the release, without the images' v: it must be the tree's (CheckVersion).
	Version string
	// Registry holds the images, <Registry>/<name>:v<Version>.
	Registry string
	// ChartRepository holds the chart, <ChartRepository>/housekeeper:<Version>, as
	// `helm push housekeeper-<Version>.tgz oci://<ChartRepository>` would; default <Registry>/charts.
	ChartRepository string
	// OutDir receives the registrations and the chart archive.
	OutDir string
	// Only are the images to publish (default every deployable); they must include every one
	// the registration's chart runs.
	Only []string
	// Arch is the images' GOARCH (GOOS is linux); default this machine's.
	Arch string
	// Root is the repository's root; default the directory of go.mod at or above the
	// working directory.
	Root string
	// Revision labels the images (org.opencontainers.image.revision); default the commit
	// checked out, with -dirty when AllowDirty let a tree with changes through.
	Revision string
	// AllowDirty releases a work tree with uncommitted changes (a trial, a test); otherwise
	// that is refused, since the images' revision label would not say what they hold.
	AllowDirty bool
	// KubeVersion is the Kubernetes version the chart is rendered for when checking the
	// registration; default KUBERNETES_VERSION of scripts/versions.env.
	KubeVersion string
	// Remote are added to every registry request (a test's transport; credentials otherwise
	// come from the Docker config, through images.Push's keychain).
	Remote []remote.Option
	// Log receives progress, one line a call; nil prints to stdout.
	Log func(string)
}

func (o *Options) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if o.Log != nil {
		o.Log(line)
		return
	}
	fmt.Println("[release] " + line)
}

// Pushed is one artifact the release pushed: Ref is its tag's reference, Digest what the
// registry serves for it.
type Pushed struct {
	Name   string  `json:"name"`
	Ref    string  `json:"ref"`
	Digest v1.Hash `json:"digest"`
}

// Pinned is the artifact's repository@digest.
func (p Pushed) Pinned() string {
	repo, _, _ := strings.Cut(p.Ref, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + p.Digest.String()
}

// Result is what a release pushed and wrote.
// Run writes it into OutDir as ResultName, for what comes after a release (a CI job signing
// the digests, a test pulling them back).
type Result struct {
	Version string   `json:"version"`
	Images  []Pushed `json:"images"`
	Chart   Pushed   `json:"chart"`
	// ChartArchive is the chart's .tgz in OutDir (helm install takes it); Registration the
	// registration with the chart in the registry, InlineRegistration with the chart inline;
	// Extension gardener-operator's Extension, with the chart in the registry.
	ChartArchive       string `json:"chartArchive"`
	Registration       string `json:"registration"`
	InlineRegistration string `json:"inlineRegistration"`
	Extension          string `json:"extension"`
}

// The files Run writes into OutDir.
const (
	RegistrationName       = "controller-registration.yaml"
	InlineRegistrationName = "controller-registration-inline.yaml"
	ExtensionName          = "extension.yaml"
	ResultName             = "release.json"
)

// Run releases o.Version: see the package's comment. Everything that can be refused — the
// version, the registry, the images selected, a dirty tree — is refused before anything is
// built.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := CheckVersion(o.Version); err != nil {
		return nil, err
	}
	tag := "v" + o.Version
	shipped, err := os.ReadFile(filepath.Join(o.Root, RegistrationFile))
	if err != nil {
		return nil, fmt.Errorf("the shipped registration: %w", err)
	}
	shippedExtension, err := os.ReadFile(filepath.Join(o.Root, ExtensionFile))
	if err != nil {
		return nil, fmt.Errorf("the shipped Extension: %w", err)
	}
	deployables, err := o.deployables(shipped)
	if err != nil {
		return nil, err
	}
	if err := o.revision(ctx); err != nil {
		return nil, err
	}
	refs := map[string]name.Reference{}
	for _, d := range deployables {
		if refs[d.Name], err = images.ParseReference(o.Registry + "/" + d.Name + ":" + tag); err != nil {
			return nil, fmt.Errorf("REGISTRY %q: %w", o.Registry, err)
		}
	}
	chartRef, err := images.ParseReference(o.ChartRepository + "/" + chart.Name + ":" + o.Version)
	if err != nil {
		return nil, fmt.Errorf("the chart repository %q: %w", o.ChartRepository, err)
	}
	created, err := images.Epoch()
	if err != nil {
		return nil, err
	}
	o.logf("housekeeper %s (%s) to %s: images %s, chart %s", o.Version, o.Revision, o.Registry, strings.Join(images.Names(deployables), ", "), images.FullName(chartRef))

	built, err := buildImages(ctx, &o, deployables, created)
	if err != nil {
		return nil, err
	}
	archive, err := chart.Archive()
	if err != nil {
		return nil, fmt.Errorf("packaging the chart: %w", err)
	}
	artifact, meta, err := HelmChart(archive, created)
	if err != nil {
		return nil, err
	}
	if meta.Version != o.Version || meta.AppVersion != o.Version {
		return nil, fmt.Errorf("the packaged chart is version %s, appVersion %s, not %s", meta.Version, meta.AppVersion, o.Version)
	}
	o.logf("chart %s packaged (%d bytes)", meta.Version, len(archive))

	all := map[name.Reference]v1.Image{chartRef: artifact}
	for n, img := range built {
		all[refs[n]] = img
	}
	if err := o.push(ctx, all); err != nil {
		return nil, err
	}

	res := &Result{Version: o.Version}
	for _, d := range deployables {
		digest, err := built[d.Name].Digest()
		if err != nil {
			return nil, err
		}
		res.Images = append(res.Images, Pushed{Name: d.Name, Ref: refs[d.Name].String(), Digest: digest})
	}
	chartDigest, err := artifact.Digest()
	if err != nil {
		return nil, err
	}
	res.Chart = Pushed{Name: chart.Name, Ref: chartRef.String(), Digest: chartDigest}

	if err := o.write(ctx, res, shipped, shippedExtension, archive); err != nil {
		return nil, err
	}

	for _, p := range res.Images {
		o.logf("%-22s %s", p.Name, p.Pinned())
	}
	o.logf("%-22s %s", "chart", res.Chart.Pinned())
	o.logf("wrote %s, %s, %s, %s and %s", res.Registration, res.InlineRegistration, res.Extension, res.ChartArchive, ResultName)
	o.logf("register it in the garden: kubectl apply -f %s (or, where gardener-operator runs the garden, kubectl apply -f %s in its runtime cluster)", res.Registration, res.Extension)
	o.logf("done in %s", since(start))
	return res, nil
}

// write writes the chart archive, both registrations and the Extension (each checked against
// the registry) and the result into o.OutDir, filling in res's file names.
func (o *Options) write(ctx context.Context, res *Result, shipped, shippedExtension, archive []byte) error {
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return err
	}
	res.ChartArchive = filepath.Join(o.OutDir, fmt.Sprintf("%s-%s.tgz", chart.Name, o.Version))
	if err := os.WriteFile(res.ChartArchive, archive, 0o644); err != nil {
		return err
	}
	digests := map[string]string{}
	for _, p := range res.Images {
		digests[p.Name] = p.Digest.String()
	}
	r := Registration{Version: o.Version, Registry: o.Registry, Tag: "v" + o.Version, Digests: digests}
	for _, form := range []struct {
		file *string
		name string
		ref  string
		raw  []byte
	}{
		{&res.Registration, RegistrationName, res.Chart.Ref + "@" + res.Chart.Digest.String(), nil},
		{&res.InlineRegistration, InlineRegistrationName, "", archive},
	} {
		r.ChartRef, r.Chart = form.ref, form.raw
		data, err := r.Write(shipped)
		if err != nil {
			return err
		}
		*form.file = filepath.Join(o.OutDir, form.name)
		if err := os.WriteFile(*form.file, data, 0o644); err != nil {
			return err
		}
		if err := o.verify(ctx, *form.file, data, res); err != nil {
			return err
		}
	}
	r.ChartRef, r.Chart = res.Chart.Ref+"@"+res.Chart.Digest.String(), nil
	data, err := r.WriteExtension(shippedExtension)
	if err != nil {
		return err
	}
	res.Extension = filepath.Join(o.OutDir, ExtensionName)
	if err := os.WriteFile(res.Extension, data, 0o644); err != nil {
		return err
	}
	if err := o.verify(ctx, res.Extension, data, res); err != nil {
		return err
	}

	summary, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.OutDir, ResultName), append(summary, '\n'), 0o644)
}

// verify checks a registration just written against the registry, and that the images it
// names are exactly ones this release pushed.
func (o *Options) verify(ctx context.Context, file string, data []byte, res *Result) error {
	check := Verify
	if filepath.Base(file) == ExtensionName {
		check = VerifyExtension
	}
	v, err := check(ctx, data, o.KubeVersion, o.Remote...)
	if err != nil {
		return fmt.Errorf("%s does not hold: %w", file, err)
	}
	pushed := map[string]bool{}
	for _, p := range res.Images {
		pushed[p.Pinned()] = true
	}
	for _, img := range v.Images {
		if !pushed[img] {
			return fmt.Errorf("%s names the image %s, which this release did not push", file, img)
		}
	}
	if v.ChartRef != "" && (v.ChartDigest != res.Chart.Digest || !strings.HasPrefix(v.ChartRef, res.Chart.Ref+"@")) {
		return fmt.Errorf("%s names the chart %s, this release pushed %s", file, v.ChartRef, res.Chart.Pinned())
	}
	o.logf("%s: the chart %s renders %d images for a seed, each pulled by its digest", filepath.Base(file), v.ChartVersion, len(v.Images))
	return nil
}

func (o *Options) defaults() error {
	o.Registry = strings.TrimSuffix(o.Registry, "/")
	if o.Registry == "" {
		return errors.New("no REGISTRY: a release is pushed to <REGISTRY>/<image>:v<VERSION>")
	}
	if o.ChartRepository == "" {
		o.ChartRepository = o.Registry + "/charts"
	}
	o.ChartRepository = strings.TrimSuffix(o.ChartRepository, "/")
	if o.OutDir == "" {
		return errors.New("no output directory for the registration")
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Root == "" {
		root, err := images.ModuleRoot()
		if err != nil {
			return err
		}
		o.Root = root
	}
	if o.KubeVersion == "" {
		v, err := pinned(o.Root, "KUBERNETES_VERSION")
		if err != nil {
			return err
		}
		o.KubeVersion = v
	}
	return nil
}

// deployables are the images o selects, refused when the registration's chart runs one that is
// not among them (the registration would name an image this release does not push).
func (o *Options) deployables(shipped []byte) ([]images.Deployable, error) {
	selected, err := images.Select(o.Only...)
	if err != nil {
		return nil, err
	}
	needed, err := o.neededImages(shipped)
	if err != nil {
		return nil, err
	}
	for _, n := range needed {
		if !slices.Contains(images.Names(selected), n) {
			return nil, fmt.Errorf("the registration's chart runs the image %s, which is not among the images selected (%s): the registration would name an image this release does not push",
				n, strings.Join(images.Names(selected), ", "))
		}
	}
	return selected, nil
}

// neededImages are the names of the images the shipped registration's chart runs in a seed,
// rendered with its values and this release's registry and tag.
func (o *Options) neededImages(shipped []byte) ([]string, error) {
	r := Registration{Version: o.Version, Registry: o.Registry, Tag: "v" + o.Version, ChartRef: "example.com/chart:" + o.Version}
	data, err := r.Write(shipped)
	if err != nil {
		return nil, err
	}
	reg, dep, err := DecodeRegistration(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RegistrationFile, err)
	}
	values, err := Values(dep)
	if err != nil {
		return nil, err
	}
	archive, err := chart.Archive()
	if err != nil {
		return nil, err
	}
	manifest, err := renderForSeed(archive, values, reg.Spec.Resources, o.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("the chart with %s's values: %w", RegistrationFile, err)
	}
	var out []string
	for _, img := range ContainerImages(manifest) {
		ref, err := name.ParseReference(img)
		if err != nil {
			return nil, fmt.Errorf("the chart renders the image %q: %w", img, err)
		}
		if repo := ref.Context().Name(); path.Dir(repo) != path.Clean(mustRepo(o.Registry)) {
			return nil, fmt.Errorf("the chart renders the image %s, not one of %s", img, o.Registry)
		}
		out = append(out, path.Base(ref.Context().RepositoryStr()))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// mustRepo is registry as ggcr names a repository under it (index.docker.io for Docker Hub).
func mustRepo(registry string) string {
	if r, err := name.NewRepository(registry + "/x"); err == nil {
		return path.Dir(r.Name())
	}
	return registry
}

// revision fills in o.Revision from git, and refuses a tree with uncommitted changes unless
// o.AllowDirty.
func (o *Options) revision(ctx context.Context) error {
	if o.Revision != "" && o.AllowDirty {
		return nil
	}
	head, err := exec.CommandContext(ctx, "git", "-C", o.Root, "rev-parse", "HEAD").Output()
	if err != nil {
		if o.AllowDirty {
			o.Revision = "unknown"
			return nil
		}
		return fmt.Errorf("which commit is released: git rev-parse HEAD in %s: %w (ALLOW_DIRTY=1, -allow-dirty, releases anyway)", o.Root, err)
	}
	status, err := exec.CommandContext(ctx, "git", "-C", o.Root, "status", "--porcelain").Output()
	if err != nil {
		return fmt.Errorf("git status in %s: %w", o.Root, err)
	}
	rev := strings.TrimSpace(string(head))
	if changed := strings.Split(strings.TrimSpace(string(status)), "\n"); len(status) > 0 {
		if !o.AllowDirty {
			return fmt.Errorf("the work tree has %d uncommitted changes (first: %s): the images would be labelled with commit %s without holding it; commit them, or ALLOW_DIRTY=1 (-allow-dirty) for a trial release",
				len(changed), strings.TrimSpace(changed[0]), rev[:min(len(rev), 12)])
		}
		rev += "-dirty"
	}
	if o.Revision == "" {
		o.Revision = rev
	}
	return nil
}

// push writes imgs (the images and the chart) with images.Push, printing progress.
func (o *Options) push(ctx context.Context, imgs map[name.Reference]v1.Image) error {
	updates := make(chan v1.Update, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := time.Now()
		for u := range updates {
			if u.Total > 0 && u.Complete < u.Total && time.Since(last) > 2*time.Second {
				o.logf("pushing: %.1f of %.1f MB", float64(u.Complete)/1e6, float64(u.Total)/1e6)
				last = time.Now()
			}
		}
	}()
	t := time.Now()
	o.logf("pushing %d images and the chart", len(imgs)-1)
	err := images.Push(ctx, imgs, append(slices.Clone(o.Remote), remote.WithProgress(updates))...)
	<-done
	if err != nil {
		return err
	}
	o.logf("pushed in %s", since(t))
	return nil
}

// pinned is key's value in scripts/versions.env.
func pinned(root, key string) (string, error) {
	f, err := os.Open(filepath.Join(root, "scripts", "versions.env"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("scripts/versions.env pins no %s", key)
}
