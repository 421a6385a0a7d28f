package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var (
	helloOnce sync.Once
	helloPath string
	helloErr  error
)

// hello is a static linux binary of this machine's architecture, built once: a stand-in for a
// deployable or a third-party binary such as nats-server.
func hello(t *testing.T) string {
	t.Helper()
	helloOnce.Do(func() {
		dir, err := os.MkdirTemp("", "images-test-hello-")
		if err != nil {
			helloErr = err
			return
		}
		src := map[string]string{"go.mod": "module hello\n", "main.go": "package main\n\nfunc main() { println(\"hello\") }\n"}
		for f, s := range src {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
				helloErr = err
				return
			}
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "hello", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=-buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			helloErr = errors.New("go build hello: " + err.Error() + "\n" + string(out))
			return
		}
		helloPath = filepath.Join(dir, "hello")
	})
	if helloErr != nil {
		t.Fatal(helloErr)
	}
	return helloPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if helloPath != "" {
		os.RemoveAll(filepath.Dir(helloPath))
	}
	os.Exit(code)
}

var labels = map[string]string{
	"org.opencontainers.image.title":       "hello",
	"org.opencontainers.image.description": "a test",
	"org.opencontainers.image.source":      "https://github.com/housekeeper-dev/housekeeper",
	"org.opencontainers.image.version":     "v0.0.1",
	"org.opencontainers.image.revision":    "0123456789abcdef",
}

func helloSpec(t *testing.T) Spec {
	return Spec{Binary: hello(t), Path: "/usr/local/bin/hello", Ports: []string{"8080"}, Labels: labels}
}

func mustImage(t *testing.T, s Spec) v1.Image {
	t.Helper()
	img, err := Binary(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image does not validate: %v", err)
	}
	return img
}

func TestConfig(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	img := mustImage(t, helloSpec(t))
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/hello"}) || c.Cmd != nil {
		t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/hello] and none", c.Entrypoint, c.Cmd)
	}
	if !maps.Equal(c.Labels, labels) {
		t.Errorf("labels %v, want %v", c.Labels, labels)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want 8080/tcp", c.ExposedPorts)
	}
	if !slices.Contains(c.Env, "PATH="+DefaultPath) {
		t.Errorf("env %q has no PATH", c.Env)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !cfg.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("created %s, want the Unix epoch (no SOURCE_DATE_EPOCH)", cfg.Created)
	}
	if len(cfg.RootFS.DiffIDs) != 2 || len(cfg.History) != 2 {
		t.Errorf("%d layers, %d history entries; want 2 and 2 (the base, the binary)", len(cfg.RootFS.DiffIDs), len(cfg.History))
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types %s, %s; want OCI's", m.MediaType, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s, want %s", l.MediaType, types.OCILayer)
		}
	}
}

// A third-party binary (nats-server, pause) with its own path, user, arguments and platform.
func TestThirdPartyBinary(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	img := mustImage(t, Spec{
		Binary: hello(t), Path: "/nats-server", User: "1000:1000", Cmd: []string{"--jetstream"},
		Env: []string{"PATH=/", "NATS_DEBUG=1"}, Arch: runtime.GOARCH,
	})
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "1000:1000" || !slices.Equal(c.Entrypoint, []string{"/nats-server"}) || !slices.Equal(c.Cmd, []string{"--jetstream"}) {
		t.Errorf("user %q entrypoint %q cmd %q", c.User, c.Entrypoint, c.Cmd)
	}
	if want := []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "NATS_DEBUG=1"}; !slices.Equal(c.Env, want) {
		t.Errorf("env %q, want %q", c.Env, want)
	}
	if c.ExposedPorts != nil || c.Labels != nil {
		t.Errorf("ports %v labels %v, want none", c.ExposedPorts, c.Labels)
	}
	if !cfg.Created.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH's", cfg.Created)
	}
	files := layerFiles(t, img, 1)
	if h := files["nats-server"]; h == nil || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("nats-server in the layer: %+v", h)
	}
}

type file struct {
	typ      byte
	mode     int64
	uid, gid int
}

func TestBaseLayer(t *testing.T) {
	modTime := time.Unix(1234567890, 0)
	img := mustImage(t, Spec{Binary: hello(t), Created: modTime})
	files := layerFiles(t, img, 0)
	want := map[string]file{
		"etc/":                              {tar.TypeDir, 0o755, 0, 0},
		"etc/group":                         {tar.TypeReg, 0o644, 0, 0},
		"etc/nsswitch.conf":                 {tar.TypeReg, 0o644, 0, 0},
		"etc/passwd":                        {tar.TypeReg, 0o644, 0, 0},
		"etc/ssl/":                          {tar.TypeDir, 0o755, 0, 0},
		"etc/ssl/certs/":                    {tar.TypeDir, 0o755, 0, 0},
		"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0},
		"home/":                             {tar.TypeDir, 0o755, 0, 0},
		"home/nonroot/":                     {tar.TypeDir, 0o700, 65532, 65532},
		"root/":                             {tar.TypeDir, 0o700, 0, 0},
		"tmp/":                              {tar.TypeDir, 0o1777, 0, 0},
		"var/":                              {tar.TypeDir, 0o755, 0, 0},
		"var/lib/":                          {tar.TypeDir, 0o755, 0, 0},
		"var/lib/housekeeper/":              {tar.TypeDir, 0o755, 0, 0},
		"var/lib/housekeeper/buckets/":      {tar.TypeDir, 0o755, 65532, 65532},
		"var/lib/housekeeper/nats/":         {tar.TypeDir, 0o755, 65532, 65532},
	}
	got := map[string]file{}
	for n, h := range files {
		got[n] = file{h.Typeflag, h.Mode, h.Uid, h.Gid}
		if !h.ModTime.Equal(modTime) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %s user %q group %q, want %s and no names", n, h.ModTime, h.Uname, h.Gname, modTime)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("base layer:\n got %v\nwant %v", got, want)
	}
	if mode := files["tmp/"].FileInfo().Mode(); mode&os.ModeSticky == 0 || mode.Perm() != 0o777 {
		t.Errorf("/tmp mode %s, want drwxrwxrwt", mode)
	}

	contents := layerContents(t, img, 0)
	host, err := os.ReadFile(HostCACerts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(contents["etc/ssl/certs/ca-certificates.crt"], host) {
		t.Error("ca-certificates.crt is not the host's bundle")
	}
	if !strings.Contains(string(contents["etc/passwd"]), "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") ||
		!strings.HasPrefix(string(contents["etc/passwd"]), "root:x:0:0:") {
		t.Errorf("passwd:\n%s", contents["etc/passwd"])
	}
	if !strings.Contains(string(contents["etc/group"]), "\nnonroot:x:65532:\n") || !strings.HasPrefix(string(contents["etc/group"]), "root:x:0:\n") {
		t.Errorf("group:\n%s", contents["etc/group"])
	}
}

func TestBaseWithoutCertificates(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if _, err := Base(missing, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Errorf("error %v, want one naming %s", err, missing)
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Base(empty, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("error %v, want no PEM certificate", err)
	}
}

func TestBinaryLayer(t *testing.T) {
	img := mustImage(t, helloSpec(t))
	files := layerFiles(t, img, 1)
	want := map[string]file{
		"usr/": {tar.TypeDir, 0o755, 0, 0}, "usr/local/": {tar.TypeDir, 0o755, 0, 0}, "usr/local/bin/": {tar.TypeDir, 0o755, 0, 0},
		"usr/local/bin/hello": {tar.TypeReg, 0o755, 0, 0},
	}
	got := map[string]file{}
	for n, h := range files {
		got[n] = file{h.Typeflag, h.Mode, h.Uid, h.Gid}
	}
	if !maps.Equal(got, want) {
		t.Errorf("binary layer:\n got %v\nwant %v", got, want)
	}
	bin, err := os.ReadFile(hello(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(layerContents(t, img, 1)["usr/local/bin/hello"], bin) {
		t.Error("the binary in the image is not the one given")
	}
}

// What would not run on the base is refused, naming why.
func TestRefusesWhatCannotRun(t *testing.T) {
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		spec Spec
		want string
	}{
		{Spec{}, "no binary"},
		{Spec{Binary: hello(t), Arch: other}, "not " + other},
		{Spec{Binary: script}, "not an ELF executable"},
		{Spec{Binary: filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{Spec{Binary: hello(t), Path: "usr/bin/hello"}, "not an absolute"},
		{Spec{Binary: hello(t), Path: "/usr/bin/../hello"}, "not an absolute, clean"},
	}
	// A cgo binary of the host, when it has one.
	if ls, err := exec.LookPath("ls"); err == nil && dynamic(ls) {
		{
			cases = append(cases, struct {
				spec Spec
				want string
			}{Spec{Binary: ls}, "dynamically linked"})
		}
	}
	for _, c := range cases {
		_, err := Binary(context.Background(), c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.spec, err, c.want)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := Binary(context.Background(), Spec{Binary: hello(t)}); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("SOURCE_DATE_EPOCH=yesterday: error %v", err)
	}
}

// The same inputs give the same digest, and the tarball the same bytes; a different input a
// different digest.
func TestReproducible(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	digest := func(s Spec) v1.Hash {
		t.Helper()
		d, err := mustImage(t, s).Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := digest(helloSpec(t)), digest(helloSpec(t))
	if a != b {
		t.Fatalf("two builds of the same spec: %s and %s", a, b)
	}
	changed := helloSpec(t)
	changed.Labels = maps.Clone(labels)
	changed.Labels["org.opencontainers.image.revision"] = "fedcba"
	if digest(changed) == a {
		t.Error("another revision label, the same digest")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1")
	if digest(helloSpec(t)) == a {
		t.Error("another SOURCE_DATE_EPOCH, the same digest")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")

	// Several names, so that an order left to a map's shows.
	dir := t.TempDir()
	var tars [3][]byte
	for i := range tars {
		imgs := map[name.Reference]v1.Image{}
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			ref, err := ParseReference("example.com/" + n + ":v1")
			if err != nil {
				t.Fatal(err)
			}
			s := helloSpec(t)
			s.Labels = map[string]string{"name": n}
			imgs[ref] = mustImage(t, s)
		}
		path := filepath.Join(dir, "images.tar")
		if err := WriteTarball(context.Background(), path, imgs); err != nil {
			t.Fatal(err)
		}
		var err error
		if tars[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(tars[0], tars[1]) || !bytes.Equal(tars[0], tars[2]) {
		t.Error("the same images written three times: different tarballs")
	}
}

// The tarball holds a Docker archive (manifest.json: Docker, ggcr's tarball package) and an
// OCI layout (containerd) over the same blobs; both give back every image under its names,
// the OCI layout with its very manifest.
func TestTarball(t *testing.T) {
	bridge := mustImage(t, helloSpec(t))
	nats := mustImage(t, Spec{Binary: hello(t), Path: "/nats-server"})
	refs := map[string]v1.Image{
		"ghcr.io/housekeeper-dev/housekeeper-bridge:v0.1.0": bridge,
		"127.0.0.1:5000/housekeeper-bridge:dev":             bridge, // one image, two names
		"housekeeper:local":                                 nats,   // Docker Hub's short form
	}
	imgs := map[name.Reference]v1.Image{}
	for s, img := range refs {
		ref, err := ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		imgs[ref] = img
	}
	path := filepath.Join(t.TempDir(), "images.tar")
	if err := WriteTarball(context.Background(), path, imgs); err != nil {
		t.Fatal(err)
	}

	// Docker's side, as docker load and ggcr read it.
	for s, want := range refs {
		tag, err := name.NewTag(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tarball.ImageFromPath(path, &tag)
		if err != nil {
			t.Errorf("%s from the tarball: %v", s, err)
			continue
		}
		if err := validate.Image(got); err != nil {
			t.Errorf("%s from the tarball does not validate: %v", s, err)
		}
		sameContent(t, s, got, want)
	}
	var dockers []dockerManifest
	if err := json.Unmarshal(tarFile(t, path, "manifest.json"), &dockers); err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, d := range dockers {
		tags = append(tags, d.RepoTags...)
	}
	slices.Sort(tags)
	if want := []string{"127.0.0.1:5000/housekeeper-bridge:dev", "docker.io/library/housekeeper:local", "ghcr.io/housekeeper-dev/housekeeper-bridge:v0.1.0"}; len(dockers) != 2 || !slices.Equal(tags, want) {
		t.Errorf("manifest.json: %d images tagged %q, want 2 tagged %q", len(dockers), tags, want)
	}

	// containerd's side: oci-layout makes its importer read index.json, and
	// io.containerd.image.name names each image.
	if got := string(tarFile(t, path, "oci-layout")); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %s", got)
	}
	dir := t.TempDir()
	untar(t, path, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		"ghcr.io/housekeeper-dev/housekeeper-bridge:v0.1.0": "ghcr.io/housekeeper-dev/housekeeper-bridge:v0.1.0",
		"127.0.0.1:5000/housekeeper-bridge:dev":             "127.0.0.1:5000/housekeeper-bridge:dev",
		"docker.io/library/housekeeper:local":               "housekeeper:local",
	}
	if len(im.Manifests) != len(names) {
		t.Errorf("index.json: %d manifests, want %d", len(im.Manifests), len(names))
	}
	for _, desc := range im.Manifests {
		full := desc.Annotations["io.containerd.image.name"]
		want, ok := refs[names[full]]
		if !ok {
			t.Errorf("index.json names an image %q", full)
			continue
		}
		if tag := full[strings.LastIndex(full, ":")+1:]; desc.Annotations["org.opencontainers.image.ref.name"] != tag {
			t.Errorf("%s: org.opencontainers.image.ref.name %q, want %q", full, desc.Annotations["org.opencontainers.image.ref.name"], tag)
		}
		if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
			t.Errorf("%s: platform %v, want linux/%s", full, desc.Platform, runtime.GOARCH)
		}
		got, err := idx.Image(desc.Digest)
		if err != nil {
			t.Errorf("%s: %v", full, err)
			continue
		}
		if err := validate.Image(got); err != nil {
			t.Errorf("%s from the OCI layout does not validate: %v", full, err)
		}
		if wantDigest, _ := want.Digest(); desc.Digest != wantDigest {
			t.Errorf("%s: manifest %s in the OCI layout, want the image's %s", full, desc.Digest, wantDigest)
		}
	}

	// The base layer, shared, is in the tarball once.
	counts := map[string]int{}
	tr := tar.NewReader(bytes.NewReader(mustRead(t, path)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		counts[h.Name]++
	}
	for n, c := range counts {
		if c != 1 {
			t.Errorf("%s is in the tarball %d times", n, c)
		}
	}
}

func TestPushToLoopbackRegistry(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine's
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	bridge := mustImage(t, helloSpec(t))
	nats := mustImage(t, Spec{Binary: hello(t), Path: "/nats-server"})
	imgs := map[name.Reference]v1.Image{}
	want := map[string]v1.Image{host + "/housekeeper-dev/housekeeper-bridge:v0.1.0": bridge, host + "/nats:2.15.2": nats}
	for s, img := range want {
		ref, err := ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		if scheme := ref.Context().Scheme(); scheme != "http" {
			t.Errorf("%s: scheme %s, want http", s, scheme)
		}
		imgs[ref] = img
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Push(ctx, imgs); err != nil {
		t.Fatal(err)
	}
	for s, img := range want {
		ref, err := ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s: %v", s, err)
		}
		gotDigest, err := got.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if wantDigest, _ := img.Digest(); gotDigest != wantDigest {
			t.Errorf("%s: pulled %s, pushed %s", s, gotDigest, wantDigest)
		}
		if err := validate.Image(got); err != nil {
			t.Errorf("%s pulled does not validate: %v", s, err)
		}
	}
}

var zeros64 = strings.Repeat("0", 64)

func TestParseReference(t *testing.T) {
	for s, scheme := range map[string]string{
		"localhost:5000/a:b": "http", "127.0.0.1:5000/a:b": "http", "[::1]:5000/a:b": "http", "localhost/a:b": "http",
		"ghcr.io/housekeeper-dev/housekeeper:v0.1.0": "https", "housekeeper:local": "https", "10.0.0.1.example.com/a:b": "https",
	} {
		ref, err := ParseReference(s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if got := ref.Context().Scheme(); got != scheme {
			t.Errorf("%s: scheme %s, want %s", s, got, scheme)
		}
	}
	for s, want := range map[string]string{
		"housekeeper:local":              "docker.io/library/housekeeper:local",
		"index.docker.io/nats-io/nats:2": "docker.io/nats-io/nats:2",
		"registry.k8s.io/pause:3.10":     "registry.k8s.io/pause:3.10",
		"localhost:5000/a/b":             "localhost:5000/a/b:latest",
		"ghcr.io/a/b@sha256:" + zeros64:  "ghcr.io/a/b@sha256:" + zeros64,
	} {
		ref, err := ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := FullName(ref); got != want {
			t.Errorf("FullName(%s) = %s, want %s", s, got, want)
		}
	}
	if _, err := ParseReference("UPPER/case:tag"); err == nil || !strings.Contains(err.Error(), `"UPPER/case:tag"`) {
		t.Errorf("an invalid reference: error %v", err)
	}
}

// The deployables are exactly the main packages under functions/cmd and bridge/cmd, each named
// as the chart names its images (housekeeper-bridge, housekeeper, housekeeper-<type>).
func TestDeployables(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, parent := range []string{"functions/cmd", "bridge/cmd"} {
		entries, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				want = append(want, "./"+parent+"/"+e.Name())
			}
		}
	}
	var got []string
	for _, d := range Deployables() {
		got = append(got, d.Package)
		main, err := os.ReadFile(filepath.Join(root, d.Package, "main.go"))
		if err != nil || !strings.Contains(string(main), "\npackage main\n") {
			t.Errorf("%s is not a main package: %v", d.Package, err)
		}
		if d.Name != filepath.Base(d.Package) {
			t.Errorf("%s: image %s, want the package's name", d.Package, d.Name)
		}
		wantPath := "/usr/local/bin/housekeeper"
		if d.Name == "housekeeper-bridge" {
			wantPath = "/usr/local/bin/housekeeper-bridge"
		}
		if d.Path != wantPath || d.Description == "" {
			t.Errorf("%s: path %s, description %q", d.Name, d.Path, d.Description)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("deployables %v, want the main packages %v", got, want)
	}
}

// Build, on a module of two main packages standing in for the deployables: each image is
// exactly Binary's of the binary go build made, with the labels, port and time make images and
// make release rely on; the same options give the same digests; Check sees every binary
// before anything is assembled, and its error stops the Build.
func TestBuild(t *testing.T) {
	t.Setenv("GOWORK", "off")
	root := t.TempDir()
	src := map[string]string{"go.mod": "module buildtest\n"}
	for _, n := range []string{"alpha", "beta"} {
		src["cmd/"+n+"/main.go"] = "package main\n\nfunc main() { println(\"" + n + "\") }\n"
	}
	for f, s := range src {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ds := []Deployable{
		{Name: "alpha", Package: "./cmd/alpha", Path: "/usr/local/bin/alpha", Description: "the first"},
		{Name: "beta", Package: "./cmd/beta", Path: "/usr/local/bin/housekeeper", Description: "the second"},
	}
	created := time.Unix(1700000000, 0).UTC()
	kept := t.TempDir() // the binaries as Check saw them: Build removes its own
	var checked []string
	o := BuildOptions{
		Root:        root,
		Version:     "v1.2.3",
		Revision:    "0123456789abcdef0123456789abcdef01234567",
		Deployables: ds,
		Created:     created,
		Log:         t.Logf,
		Check: func(d Deployable, binary string) error {
			checked = append(checked, d.Name)
			if filepath.Base(binary) != filepath.Base(d.Package) {
				t.Errorf("Check(%s, %s): the binary is not named after its package", d.Name, binary)
			}
			data, err := os.ReadFile(binary)
			if err != nil {
				return err
			}
			dir := filepath.Join(kept, d.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, filepath.Base(binary)), data, 0o755)
		},
	}
	ctx := context.Background()
	imgs, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(checked, []string{"alpha", "beta"}) {
		t.Errorf("Check saw %v, want alpha and beta in order", checked)
	}
	if got := slices.Sorted(maps.Keys(imgs)); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("images %v, want alpha and beta", got)
	}
	base, err := Base(HostCACerts, created)
	if err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := base.Digest()
	digests := map[string]v1.Hash{}
	for _, d := range ds {
		img := imgs[d.Name]
		if err := validate.Image(img); err != nil {
			t.Fatalf("%s does not validate: %v", d.Name, err)
		}
		binary := filepath.Join(kept, d.Name, filepath.Base(d.Package))
		want := mustImage(t, Spec{
			Binary:  binary,
			Path:    d.Path,
			Ports:   []string{"8080/tcp"},
			Arch:    runtime.GOARCH,
			Created: created,
			Labels: map[string]string{
				"org.opencontainers.image.title":       d.Name,
				"org.opencontainers.image.description": d.Description,
				"org.opencontainers.image.source":      "https://github.com/housekeeper-dev/housekeeper",
				"org.opencontainers.image.version":     o.Version,
				"org.opencontainers.image.revision":    o.Revision,
			},
		})
		sameContent(t, d.Name, img, want)
		if digests[d.Name], err = img.Digest(); err != nil {
			t.Fatal(err)
		}
		if w, _ := want.Digest(); digests[d.Name] != w {
			t.Errorf("%s: digest %s, Binary's of the same spec %s", d.Name, digests[d.Name], w)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.Created.Equal(created) || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
			t.Errorf("%s: created %s, platform %s/%s", d.Name, cfg.Created, cfg.OS, cfg.Architecture)
		}
		if layers, err := img.Layers(); err != nil || len(layers) != 2 {
			t.Fatalf("%s: %d layers (%v), want the base and the binary", d.Name, len(layers), err)
		} else if got, _ := layers[0].Digest(); got != baseDigest {
			t.Errorf("%s: base layer %s, want Base's %s", d.Name, got, baseDigest)
		}
		data, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		if got := layerContents(t, img, 1)[strings.TrimPrefix(d.Path, "/")]; !slices.Equal(got, data) {
			t.Errorf("%s: %s in the image is not the binary built (%d bytes, want %d)", d.Name, d.Path, len(got), len(data))
		}
		if runtime.GOOS == "linux" {
			out, err := exec.Command(binary).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != d.Name {
				t.Errorf("%s's binary prints %q (%v), want its package's %q", d.Name, out, err, d.Name)
			}
		}
	}

	// The same options again: the same digests. Nothing of this machine's or of the moment
	// (the temporary directory, the time) gets in.
	o.Check = nil
	again, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for n, img := range again {
		if d, _ := img.Digest(); d != digests[n] {
			t.Errorf("%s built again: %s, first %s", n, d, digests[n])
		}
	}

	stop := errors.New("refused")
	o.Check = func(d Deployable, _ string) error { return stop }
	if _, err := Build(ctx, o); !errors.Is(err, stop) {
		t.Errorf("Check refusing: Build says %v", err)
	}
	o.Check = nil
	o.Deployables = append(o.Deployables, Deployable{Name: "gamma", Package: "./cmd/gamma", Path: "/gamma"})
	if _, err := Build(ctx, o); err == nil || !strings.Contains(err.Error(), "cmd/gamma") {
		t.Errorf("a package that does not exist: Build says %v, want go build's error naming it", err)
	}
}

func TestSelect(t *testing.T) {
	all := Deployables()
	if got, err := Select(); err != nil || !slices.Equal(Names(got), Names(all)) {
		t.Errorf("Select(): %v, %v; want every deployable", Names(got), err)
	}
	got, err := Select("housekeeper-aws", "housekeeper-bridge", "housekeeper-aws")
	if err != nil || !slices.Equal(Names(got), []string{"housekeeper-aws", "housekeeper-bridge"}) {
		t.Errorf("Select(aws, bridge, aws): %v, %v; want aws and bridge, once each, in that order", Names(got), err)
	}
	if _, err := Select("housekeeper-bridge", "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "housekeeper-bridge") {
		t.Errorf("Select(nope): %v, want an error naming it and the images there are", err)
	}
}

// dynamic says whether file is an ELF executable asking for an interpreter.
func dynamic(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
}

func sameContent(t *testing.T, what string, got, want v1.Image) {
	t.Helper()
	g, err := got.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if g != w {
		t.Errorf("%s: config %s, want %s", what, g, w)
	}
	gl, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	wl, err := want.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(gl) != len(wl) {
		t.Fatalf("%s: %d layers, want %d", what, len(gl), len(wl))
	}
	for i := range gl {
		g, _ := gl[i].Digest()
		w, _ := wl[i].Digest()
		if g != w {
			t.Errorf("%s: layer %d is %s, want %s", what, i, g, w)
		}
	}
}

// layerFiles are the tar headers of img's layer i by name.
func layerFiles(t *testing.T, img v1.Image, i int) map[string]*tar.Header {
	t.Helper()
	files := map[string]*tar.Header{}
	readLayer(t, img, i, func(h *tar.Header, _ []byte) { files[h.Name] = h })
	return files
}

func layerContents(t *testing.T, img v1.Image, i int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	readLayer(t, img, i, func(h *tar.Header, b []byte) { files[h.Name] = b })
	return files
}

func readLayer(t *testing.T, img v1.Image, i int, f func(*tar.Header, []byte)) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[i].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f(h, b)
	}
}

func tarFile(t *testing.T, path, file string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(mustRead(t, path)))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s in %s: %v", file, path, err)
		}
		if h.Name == file {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(mustRead(t, path)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("%s leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, b, 0o644)
			}
		default:
			t.Fatalf("%s: unexpected type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
