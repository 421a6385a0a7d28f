package compose

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// registry is where the stand-ins are named: nothing is pulled from it (they are loaded).
const registry = "housekeeper.local/compose/"

// standIn is the image override.yaml gives a service of docker-compose.yaml.
type standIn struct {
	services []string // the services that run it
	ref      string   // registry + name:version
	build    func(b *builder, ctx context.Context) (v1.Image, error)
}

// standIns are the images of override.yaml, at the versions this machine's components are
// installed at (scripts/versions.env, go.mod, scripts/azurite/package-lock.json).
func standIns(root string) ([]standIn, error) {
	versions, err := stack.Versions()
	if err != nil {
		return nil, err
	}
	nats, err := stack.RequiredVersion(filepath.Join(root, "go.mod"), "github.com/nats-io/nats-server/v2")
	if err != nil {
		return nil, err
	}
	azurite, err := azuriteVersion(root)
	if err != nil {
		return nil, err
	}
	return []standIn{
		{[]string{"nats"}, registry + "nats:" + strings.TrimPrefix(nats, "v"), (*builder).nats},
		{[]string{"azurite"}, registry + "azurite:" + azurite, (*builder).azurite},
		{[]string{"s3"}, registry + "versitygw:" + versions["VERSITYGW_VERSION"], (*builder).versitygw},
		{[]string{"gcs"}, registry + "fake-gcs-server:" + strings.TrimPrefix(versions["FAKE_GCS_SERVER_VERSION"], "v"), (*builder).gcs},
		{[]string{"etcd"}, registry + "etcd:" + versions["ETCD_VERSION"], (*builder).etcd},
		{[]string{"k3s", "kube-init"}, registry + "k3s-standin:" + versions["KUBERNETES_VERSION"], (*builder).k3s},
	}, nil
}

func azuriteVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "scripts/azurite/package-lock.json"))
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return "", err
	}
	v := lock.Packages["node_modules/azurite"].Version
	if v == "" {
		return "", fmt.Errorf("scripts/azurite/package-lock.json pins no azurite")
	}
	return v, nil
}

// standInsTarball returns a tarball of every stand-in, for docker load: the one cached under
// what goes into them, or one built now and cached (building them takes minutes of compression;
// their inputs change with a pinned version, the code that builds them or a reinstalled tool).
// It says how long each took through logf.
func standInsTarball(ctx context.Context, root, work string, logf func(string, ...any)) (string, error) {
	list, err := standIns(root)
	if err != nil {
		return "", err
	}
	in := stack.Inputs{Text: []string{runtime.GOARCH}}
	for _, s := range list {
		in.Text = append(in.Text, fmt.Sprint(s.ref, s.services))
	}
	in.Sources = []string{"scripts/images/*.go", "test/compose/images_test.go", "test/compose/k3s/*.go", "go.sum"}
	if in.Installed, err = standInInputs(); err != nil {
		return "", err
	}
	tarball, hit, err := stack.Cached("compose-stand-ins", in, func(out string) error {
		return buildStandIns(ctx, root, work, list, out, logf)
	})
	if hit {
		logf("stand-ins cached in %s", tarball)
	}
	return tarball, err
}

// standInInputs are the files the stand-ins copy from this machine.
func standInInputs() ([]string, error) {
	var inputs []string
	for _, find := range []func() (string, error){stack.NATSServerBinary, stack.S3Binary, stack.GCSBinary, stack.AzuriteBinary} {
		bin, err := find()
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, bin)
	}
	cp, err := stack.ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	tools, err := stack.InstalledDockerTools()
	if err != nil {
		return nil, err
	}
	inputs = append(inputs, filepath.Join(cp, "etcd"), filepath.Join(cp, "kube-apiserver"), tools.Etcdctl, tools.Kubectl)
	for _, cmd := range []string{"node", "busybox"} {
		bin, err := exec.LookPath(cmd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		if bin, err = filepath.EvalSymlinks(bin); err != nil {
			return nil, err
		}
		inputs = append(inputs, bin)
	}
	return inputs, nil
}

// buildStandIns builds the stand-ins of list into one tarball at out.
func buildStandIns(ctx context.Context, root, work string, list []standIn, out string, logf func(string, ...any)) error {
	b, err := newBuilder(root, work)
	if err != nil {
		return err
	}
	imgs := map[name.Reference]v1.Image{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for _, s := range list {
		g.Go(func() error {
			start := time.Now()
			img, err := s.build(b, gctx)
			if err != nil {
				return fmt.Errorf("image %s: %w", s.ref, err)
			}
			// Its layers compressed (and held) now, not one after the other by WriteTarball.
			layers, err := img.Layers()
			if err != nil {
				return err
			}
			var size int64
			for _, l := range layers {
				n, err := l.Size()
				if err != nil {
					return fmt.Errorf("image %s: %w", s.ref, err)
				}
				size += n
			}
			logf("stand-in %s assembled in %s, %.1f MB compressed", s.ref, time.Since(start).Round(100*time.Millisecond), float64(size)/1e6)
			ref, err := images.ParseReference(s.ref)
			if err != nil {
				return err
			}
			mu.Lock()
			imgs[ref] = img
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	start := time.Now()
	if err := images.WriteTarball(ctx, out, imgs); err != nil {
		return err
	}
	logf("stand-ins written to %s in %s", out, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// builder holds what the stand-ins share: the base layer and busybox's.
type builder struct {
	root, work string
	base       v1.Layer
	busybox    func() (v1.Layer, error)
}

func newBuilder(root, work string) (*builder, error) {
	created, err := images.Epoch()
	if err != nil {
		return nil, err
	}
	base, err := images.Base(images.HostCACerts, created)
	if err != nil {
		return nil, err
	}
	b := &builder{root: root, work: work, base: base}
	b.busybox = sync.OnceValues(busyboxLayer)
	return b, nil
}

// binary is images.Binary on the shared base, run as root (as the originals are), with more
// layers on top and its config changed by edit.
func (b *builder) binary(ctx context.Context, spec images.Spec, layers []v1.Layer, edit func(*v1.Config)) (v1.Image, error) {
	spec.Base = b.base
	if spec.User == "" {
		spec.User = "0:0"
	}
	img, err := images.Binary(ctx, spec)
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	if edit == nil {
		return img, nil
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	edit(&cfg.Config)
	return mutate.ConfigFile(img, cfg)
}

// nats is nats-server as the entrypoint (the alpine image's docker-entrypoint.sh runs it when
// the command starts with a flag, as the compose file's does), and busybox.
func (b *builder) nats(ctx context.Context) (v1.Image, error) {
	bin, err := stack.NATSServerBinary()
	if err != nil {
		return nil, err
	}
	bb, err := b.busybox()
	if err != nil {
		return nil, err
	}
	return b.binary(ctx, images.Spec{Binary: bin, Path: "/usr/local/bin/nats-server", Ports: []string{"4222", "6222", "8222"}}, []v1.Layer{bb}, nil)
}

// versitygw at /app/versitygw, where the compose file's entrypoint script runs it, and busybox.
func (b *builder) versitygw(ctx context.Context) (v1.Image, error) {
	bin, err := stack.S3Binary()
	if err != nil {
		return nil, err
	}
	bb, err := b.busybox()
	if err != nil {
		return nil, err
	}
	return b.binary(ctx, images.Spec{Binary: bin, Path: "/app/versitygw", Ports: []string{"7070"}}, []v1.Layer{bb},
		func(c *v1.Config) { c.WorkingDir = "/app" })
}

// gcs is fake-gcs-server at /bin/fake-gcs-server, the compose file's entrypoint, and busybox.
func (b *builder) gcs(ctx context.Context) (v1.Image, error) {
	bin, err := stack.GCSBinary()
	if err != nil {
		return nil, err
	}
	bb, err := b.busybox()
	if err != nil {
		return nil, err
	}
	return b.binary(ctx, images.Spec{Binary: bin, Path: "/bin/fake-gcs-server", Ports: []string{"4443"}}, []v1.Layer{bb}, nil)
}

// etcd and etcdctl in /usr/local/bin, no entrypoint (the compose file's command names the
// binary), no shell: the distroless original has none.
func (b *builder) etcd(ctx context.Context) (v1.Image, error) {
	cp, err := stack.ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	tools, err := stack.InstalledDockerTools()
	if err != nil {
		return nil, err
	}
	ctl, err := filesLayer([]file{{path: "usr/local/bin/etcdctl", src: tools.Etcdctl, mode: 0o755}})
	if err != nil {
		return nil, err
	}
	return b.binary(ctx, images.Spec{Binary: filepath.Join(cp, "etcd"), Path: "/usr/local/bin/etcd", Ports: []string{"2379", "2380"}},
		[]v1.Layer{ctl}, func(c *v1.Config) { c.Entrypoint, c.Cmd = nil, []string{"/usr/local/bin/etcd"} })
}

// k3s is the stand-in (test/compose/k3s) as /bin/k3s, the original's entrypoint, with
// kube-apiserver and etcd from the control-plane cache, kubectl and busybox. KUBECONFIG is the
// kubeconfig k3s's own kubectl finds by itself.
func (b *builder) k3s(ctx context.Context) (v1.Image, error) {
	cp, err := stack.ControlPlaneDir()
	if err != nil {
		return nil, err
	}
	tools, err := stack.InstalledDockerTools()
	if err != nil {
		return nil, err
	}
	standin := filepath.Join(b.work, "k3s")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", standin, "./test/compose/k3s")
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./test/compose/k3s: %w\n%s", err, out)
	}
	bins, err := filesLayer([]file{
		{path: "usr/local/bin/kube-apiserver", src: filepath.Join(cp, "kube-apiserver"), mode: 0o755},
		{path: "usr/local/bin/etcd", src: filepath.Join(cp, "etcd"), mode: 0o755},
		{path: "bin/kubectl", src: tools.Kubectl, mode: 0o755},
	})
	if err != nil {
		return nil, err
	}
	bb, err := b.busybox()
	if err != nil {
		return nil, err
	}
	return b.binary(ctx, images.Spec{Binary: standin, Path: "/bin/k3s", Ports: []string{"6443"},
		Env: []string{"KUBECONFIG=/etc/rancher/k3s/k3s.yaml"}}, []v1.Layer{bins, bb}, nil)
}

// azurite is Azurite's node_modules (scripts/install-azurite.sh) in /opt/azurite with its
// commands in /usr/local/bin, as the original installs them, on this machine's node and the
// shared libraries it loads (ldd), with busybox (/usr/bin/env runs the commands' #! line).
func (b *builder) azurite(ctx context.Context) (v1.Image, error) {
	bin, err := stack.AzuriteBinary()
	if err != nil {
		return nil, err
	}
	modules := filepath.Dir(filepath.Dir(bin)) // …/node_modules
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node, which Azurite runs on: %w", err)
	}
	node, err = filepath.EvalSymlinks(node)
	if err != nil {
		return nil, err
	}
	runtimeFiles := []file{{path: "usr/local/bin/node", src: node, mode: 0o755}}
	libs, err := sharedLibraries(ctx, node)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		runtimeFiles = append(runtimeFiles, file{path: strings.TrimPrefix(l.path, "/"), src: l.src, mode: 0o755})
	}
	nodeLayer, err := filesLayer(runtimeFiles)
	if err != nil {
		return nil, err
	}
	app, err := treeFiles(modules, "opt/azurite/node_modules")
	if err != nil {
		return nil, err
	}
	for _, cmd := range []string{"azurite", "azurite-blob", "azurite-queue", "azurite-table"} {
		target, err := os.Readlink(filepath.Join(modules, ".bin", cmd))
		if err != nil {
			return nil, err
		}
		app = append(app, file{path: "usr/local/bin/" + cmd, link: path.Join("/opt/azurite/node_modules/.bin", target)})
	}
	appLayer, err := filesLayer(app)
	if err != nil {
		return nil, err
	}
	bb, err := b.busybox()
	if err != nil {
		return nil, err
	}
	created, err := images.Epoch()
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         "0:0",
			Env:          []string{"PATH=" + images.DefaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			Cmd:          []string{"azurite", "-l", "/data", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"},
			WorkingDir:   "/opt/azurite",
			ExposedPorts: map[string]struct{}{"10000/tcp": {}, "10001/tcp": {}, "10002/tcp": {}},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.AppendLayers(img, b.base, bb, nodeLayer, appLayer)
}

type library struct{ path, src string }

// lddLine is one resolved line of ldd: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or
// the loader's "/lib64/ld-linux-x86-64.so.2 (0x…)".
var lddLine = regexp.MustCompile(`^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$`)

// sharedLibraries are the libraries bin loads and its ELF interpreter, as ldd resolves them on
// this machine: each at the path the loader looks for it, read from the file it links to.
func sharedLibraries(ctx context.Context, bin string) ([]library, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	f.Close()
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []library
	for _, line := range strings.Split(string(out), "\n") {
		m := lddLine.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("ldd %s: %s", bin, strings.TrimSpace(line))
			}
			continue
		}
		src, err := filepath.EvalSymlinks(m[1])
		if err != nil {
			return nil, err
		}
		libs = append(libs, library{path: m[1], src: src})
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s: no libraries:\n%s", bin, out)
	}
	return libs, nil
}

// busyboxLayer is Debian's static busybox (busybox-static, scripts/install-docker.sh) at
// /bin/busybox with a link for each applet where `busybox --list-full` puts it, as alpine has
// them.
func busyboxLayer() (v1.Layer, error) {
	bin, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox: %w: run `make tools` (scripts/install-docker.sh installs busybox-static)", err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return nil, err
	}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return nil, fmt.Errorf("%s is dynamically linked: the images need busybox-static's (scripts/install-docker.sh)", bin)
		}
	}
	f.Close()
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", bin, err)
	}
	files := []file{{path: "bin/busybox", src: bin, mode: 0o755}}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "bin/busybox" {
			files = append(files, file{path: applet, link: "/bin/busybox"})
		}
	}
	return filesLayer(files)
}

// file is an entry of a layer: a regular file copied from src (or holding data), a symbolic
// link to link, or a directory; root-owned. Parent directories are added.
type file struct {
	path string // in the image, without a leading slash
	src  string
	data []byte
	link string
	dir  bool
	mode int64
}

// treeFiles are the files, links and directories under dir on this machine, at prefix.
func treeFiles(dir, prefix string) ([]file, error) {
	var files []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		at := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files = append(files, file{path: at, link: target})
		case d.IsDir():
			files = append(files, file{path: at, dir: true, mode: 0o755})
		case info.Mode().IsRegular():
			mode := int64(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			files = append(files, file{path: at, src: p, mode: mode})
		}
		return nil
	})
	return files, err
}

// filesLayer writes files (and their parent directories, once each) into a layer, compressed
// once, fast: these layers are read once, by docker load.
func filesLayer(files []file) (v1.Layer, error) {
	created, err := images.Epoch()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "." || dir == "/" || dir == "" || dirs[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: created})
	}
	for _, f := range files {
		if err := mkdirs(path.Dir(f.path)); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: f.path, Mode: f.mode, ModTime: created}
		switch {
		case f.dir:
			if dirs[f.path] {
				continue
			}
			dirs[f.path] = true
			hdr.Typeflag, hdr.Name = tar.TypeDir, f.path+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
		case f.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
		default:
			data := f.data
			if f.src != "" {
				if data, err = os.ReadFile(f.src); err != nil {
					return nil, err
				}
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
}

// overrideImages are the images override.yaml gives, by service; an error if it sets anything
// else (but k3s's privileged: false).
func overrideImages(root string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "test/compose/override.yaml"))
	if err != nil {
		return nil, err
	}
	var o struct {
		Services map[string]map[string]any `json:"services"`
	}
	if err := yamlUnmarshal(data, &o); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for svc, keys := range o.Services {
		ks := slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		})
		want := []string{"image"}
		if svc == "k3s" {
			want = []string{"image", "privileged"} // the stand-in runs unprivileged; see override.yaml
			if keys["privileged"] != false {
				return nil, fmt.Errorf("override.yaml: k3s: privileged %v, want false", keys["privileged"])
			}
		}
		if !slices.Equal(ks, want) {
			return nil, fmt.Errorf("override.yaml: service %s sets %v: the override swaps images, nothing else", svc, ks)
		}
		img, _ := keys["image"].(string)
		out[svc] = img
	}
	return out, nil
}
