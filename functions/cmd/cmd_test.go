// Package cmd_test checks what each of housekeeper's deployables links, and measures its size
// as its image carries it.
package cmd_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/version"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// sdks are the object store SDKs, by provider type: the package each provider imports.
var sdks = map[string]string{
	"aws":       "github.com/aws/aws-sdk-go-v2/service/s3",
	"azure":     "github.com/Azure/azure-sdk-for-go/sdk/azcore",
	"gcp":       "cloud.google.com/go/storage",
	"openstack": "github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects",
}

// deployables are the main packages of the images (scripts/images) and the SDKs each links.
var deployables = []struct {
	pkg   string
	links []string // provider types
}{
	{"github.com/housekeeper-dev/housekeeper/bridge/cmd/housekeeper-bridge", nil},
	{"github.com/housekeeper-dev/housekeeper/functions/cmd/housekeeper", []string{"aws", "azure", "gcp", "openstack"}},
	{"github.com/housekeeper-dev/housekeeper/functions/cmd/housekeeper-aws", []string{"aws"}},
	{"github.com/housekeeper-dev/housekeeper/functions/cmd/housekeeper-azure", []string{"azure"}},
	{"github.com/housekeeper-dev/housekeeper/functions/cmd/housekeeper-gcp", []string{"gcp"}},
	{"github.com/housekeeper-dev/housekeeper/functions/cmd/housekeeper-openstack", []string{"openstack"}},
}

// Each image links the SDK of its provider and no other: a seed on aws runs no Azure code.
func TestEachDeployableLinksOnlyItsProviders(t *testing.T) {
	for _, d := range deployables {
		out, err := exec.Command("go", "list", "-deps", d.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", d.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for typ, sdk := range sdks {
			if got, want := slices.Contains(deps, sdk), slices.Contains(d.links, typ); got != want {
				t.Errorf("%s links %s: %t, want %t", filepath.Base(d.pkg), sdk, got, want)
			}
		}
	}
}

// The chart and the images are released together: housekeeper --version and
// housekeeper-bridge --version print the chart's appVersion (infra/chart/Chart.yaml), and the
// images `make images` builds with its default tag, v<appVersion> — built here by its own
// command, read back from its tarball by their tags — carry binaries that print it.
func TestImagesReportTheChartsAppVersion(t *testing.T) {
	var meta struct{ AppVersion string }
	data, err := chart.FS.ReadFile("Chart.yaml")
	if err == nil {
		err = sigsyaml.Unmarshal(data, &meta)
	}
	if err != nil || meta.AppVersion == "" {
		t.Fatalf("infra/chart/Chart.yaml: no appVersion (%v)", err)
	}
	if version.Version != meta.AppVersion {
		t.Errorf("functions/version.Version is %q, the chart's appVersion %q: release them together", version.Version, meta.AppVersion)
	}

	file := filepath.Join(t.TempDir(), "images.tar")
	build := exec.Command("go", "run", "./scripts/cmd/images", "-only", "housekeeper,housekeeper-bridge", "-o", file) // make images, default registry and tag
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	tag := "v" + meta.AppVersion
	for _, d := range images.Deployables() {
		if d.Name != "housekeeper" && d.Name != "housekeeper-bridge" {
			continue
		}
		ref, err := name.NewTag("ghcr.io/housekeeper-dev/" + d.Name + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(file, &ref)
		if err != nil {
			t.Errorf("%s is not in what make images built: %v", ref, err)
			continue
		}
		if cfg, err := img.ConfigFile(); err != nil || cfg.Config.Labels["org.opencontainers.image.version"] != tag {
			t.Errorf("%s: label org.opencontainers.image.version of %v, want %s (%v)", ref, cfg.Config.Labels, tag, err)
		}
		bin := filepath.Join(t.TempDir(), filepath.Base(d.Path))
		extract(t, img, strings.TrimPrefix(d.Path, "/"), bin)
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if want := filepath.Base(d.Path) + " " + meta.AppVersion + "\n"; err != nil || string(out) != want {
			t.Errorf("%s: %s --version: %v, %q; want %q", ref, d.Path, err, out, want)
		}
	}
}

// extract writes the file at path (without its leading /) of img's filesystem to dst,
// executable.
func extract(t *testing.T, img v1.Image, path, dst string) {
	t.Helper()
	fs := mutate.Extract(img)
	defer fs.Close()
	tr := tar.NewReader(fs)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s in the image: %v", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != path {
			continue
		}
		data, err := io.ReadAll(tr)
		if err == nil {
			err = os.WriteFile(dst, data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// BenchmarkImageSize builds every deployable as `make images` does and prints its size on
// disk and gzip-compressed (a registry layer), beside upstream's BackupBucket and BackupEntry
// controllers built the same way (test/bench/upstream: provider-local's, the only upstream
// extension whose module builds here). The base layer adds 0.13 MB compressed.
//
//	go test -run '^$' -bench BenchmarkImageSize -benchtime 1x ./functions/cmd/
func BenchmarkImageSize(b *testing.B) {
	pkgs := make([]string, 0, len(deployables)+1)
	for _, d := range deployables {
		pkgs = append(pkgs, d.pkg)
	}
	const upstream = "github.com/housekeeper-dev/housekeeper/test/bench/upstream"
	pkgs = append(pkgs, upstream)
	for b.Loop() {
		dir := b.TempDir()
		build := exec.Command("go", append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + "/"}, pkgs...)...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
		fmt.Printf("\n| deployable (binary in its image) | on disk (MB) | compressed (MB) | object store SDKs linked |\n|---|---:|---:|---|\n")
		for _, pkg := range pkgs {
			path := filepath.Join(dir, filepath.Base(pkg))
			disk, compressed, err := sizes(path)
			if err != nil {
				b.Fatal(err)
			}
			label, links := filepath.Base(pkg), "—"
			if pkg == upstream {
				label = "upstream provider-local's backup controllers (test/bench/upstream)"
			}
			for _, d := range deployables {
				if d.pkg == pkg && len(d.links) > 0 {
					links = strings.Join(d.links, ", ")
				}
			}
			fmt.Printf("| %s | %.1f | %.1f | %s |\n", label, float64(disk)/1e6, float64(compressed)/1e6, links)
		}
	}
}

// sizes are the file's size and its size gzip-compressed at the default level, as a registry
// stores an image layer.
func sizes(path string) (disk, compressed int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.Copy(zw, bytes.NewReader(data)); err != nil {
		return 0, 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, 0, err
	}
	return int64(len(data)), int64(buf.Len()), nil
}
