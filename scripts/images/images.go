// Package images assembles OCI images from static binaries without a container runtime or a
// registry to pull from, the way ko and crane do: a base layer the project writes itself
// (CA certificates, passwd and group with the distroless nonroot user 65532, /tmp, housekeeper's
// volume directories) and one layer holding the binary. Images are written to one tarball that
// `docker load` and `ctr images import` both read (WriteTarball), or pushed to a registry
// (Push). The same inputs give the same digest: every file time is fixed.
//
//	img, err := images.Binary(ctx, images.Spec{Binary: "/path/to/nats-server", User: "65532:65532"})
//	ref, err := images.ParseReference("127.0.0.1:5000/nats:2.15.2")
//	err = images.WriteTarball(ctx, "images.tar", map[name.Reference]v1.Image{ref: img})
package images

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// HostCACerts is Debian's bundle of the ca-certificates package, copied into the base.
	HostCACerts = "/etc/ssl/certs/ca-certificates.crt"
	// NonRoot is distroless's nonroot user and group, the default user of every image.
	NonRoot = "65532:65532"
	// DefaultPath is the PATH of every image, as distroless sets it.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Spec is an image of one static binary on the base.
type Spec struct {
	// Binary is the static executable on this machine, for the image's OS and architecture.
	Binary string
	// Path is where it goes in the image; default /usr/local/bin/<base name of Binary>.
	Path string
	// Entrypoint defaults to [Path]; Cmd (the default arguments) to none.
	Entrypoint, Cmd []string
	// User defaults to NonRoot; "0:0" or "65535:65535" (the pause image's) work as well.
	User string
	// Env is added to PATH=DefaultPath and SSL_CERT_FILE; an entry with the same name replaces one.
	Env []string
	// Ports the binary serves on, "8080/tcp" or "8080" (tcp).
	Ports []string
	// Labels, e.g. org.opencontainers.image.title, .source, .version, .revision.
	Labels map[string]string
	// OS and Arch default to linux and runtime.GOARCH; Variant (arm's "v7") to none.
	OS, Arch, Variant string
	// Created is the config's and every file's time; zero: Epoch().
	Created time.Time
	// Base is the base layer, when several images share one; nil: Base(HostCACerts, Created).
	Base v1.Layer
}

// Epoch is the time of reproducible builds: SOURCE_DATE_EPOCH (seconds) when set, else the
// Unix epoch.
func Epoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Base is the layer under every image, in place of distroless/static: certs (HostCACerts) as
// /etc/ssl/certs/ca-certificates.crt; /etc/passwd and /etc/group with root, nobody and nonroot
// (65532) as distroless has them, and nonroot's home; /tmp (1777); and
// /var/lib/housekeeper/{buckets,nats} owned by 65532, so that a volume mounted there (docker
// compose, the chart) starts out writable by the binary. Every file has time modTime.
func Base(certs string, modTime time.Time) (v1.Layer, error) {
	pem, err := os.ReadFile(certs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("CA certificates for the base: %s does not exist (on Debian: apt-get install ca-certificates)", certs)
	}
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the base: %w", err)
	}
	if !strings.Contains(string(pem), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("CA certificates for the base: %s holds no PEM certificate", certs)
	}
	const nonroot = 65532
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	return newLayer([]entry{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		// Go reads /etc/hosts before DNS without it too; other binaries' resolvers may not.
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: pem},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: nonroot, gid: nonroot},
		{name: "root", dir: true, mode: 0o700},
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "var", dir: true, mode: 0o755},
		{name: "var/lib", dir: true, mode: 0o755},
		{name: "var/lib/housekeeper", dir: true, mode: 0o755},
		{name: "var/lib/housekeeper/buckets", dir: true, mode: 0o755, uid: nonroot, gid: nonroot},
		{name: "var/lib/housekeeper/nats", dir: true, mode: 0o755, uid: nonroot, gid: nonroot},
	}, modTime.Truncate(time.Second))
}

// Binary is the image of spec: the base layer, then a layer with spec.Binary at spec.Path
// (root-owned, 0755). The binary must be a static ELF executable of the image's
// architecture: the base has no dynamic loader or libc.
func Binary(ctx context.Context, spec Spec) (v1.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkStatic(s.Binary, s.OS, s.Arch); err != nil {
		return nil, err
	}
	base := s.Base
	if base == nil {
		if base, err = Base(HostCACerts, s.Created); err != nil {
			return nil, err
		}
	}
	file := strings.TrimPrefix(s.Path, "/")
	bin, err := newLayer(append(parents(file), entry{name: file, mode: 0o755, src: s.Binary}), s.Created)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", s.Binary, err)
	}

	ports := map[string]struct{}{}
	for _, p := range s.Ports {
		if !strings.Contains(p, "/") {
			p += "/tcp"
		}
		ports[p] = struct{}{}
	}
	if len(ports) == 0 {
		ports = nil
	}
	cfg := &v1.ConfigFile{
		Architecture: s.Arch,
		OS:           s.OS,
		Variant:      s.Variant,
		Created:      v1.Time{Time: s.Created},
		Config: v1.Config{
			User:         s.User,
			Entrypoint:   s.Entrypoint,
			Cmd:          s.Cmd,
			Env:          env(s.Env),
			ExposedPorts: ports,
			Labels:       s.Labels,
			WorkingDir:   "/",
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "housekeeper images: base (CA certificates, passwd, group, /tmp, /var/lib/housekeeper)"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "housekeeper images: COPY " + path.Base(s.Binary) + " " + s.Path}},
	)
}

func (s Spec) withDefaults() (Spec, error) {
	if s.Binary == "" {
		return s, errors.New("image spec: no binary")
	}
	if s.Path == "" {
		s.Path = "/usr/local/bin/" + path.Base(s.Binary)
	}
	if !path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path || s.Path == "/" {
		return s, fmt.Errorf("image spec: path %q in the image is not an absolute, clean file path", s.Path)
	}
	if len(s.Entrypoint) == 0 {
		s.Entrypoint = []string{s.Path}
	}
	if s.User == "" {
		s.User = NonRoot
	}
	if s.OS == "" {
		s.OS = "linux"
	}
	if s.Arch == "" {
		s.Arch = runtime.GOARCH
	}
	created, err := orEpoch(s.Created)
	if err != nil {
		return s, err
	}
	s.Created = created.UTC().Truncate(time.Second)
	return s, nil
}

// orEpoch is t, or Epoch() when t is zero.
func orEpoch(t time.Time) (time.Time, error) {
	if t.IsZero() {
		return Epoch()
	}
	return t, nil
}

// env is PATH and SSL_CERT_FILE (as distroless sets them) with extra added, an entry of extra
// replacing the default of the same name.
func env(extra []string) []string {
	out := []string{"PATH=" + DefaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	for _, e := range extra {
		k, _, _ := strings.Cut(e, "=")
		replaced := false
		for i, o := range out {
			if name, _, _ := strings.Cut(o, "="); name == k {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

// machines are the ELF machines of GOARCH values, to catch a binary of the wrong architecture.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// checkStatic refuses what would not start on the base: not an ELF executable, another
// architecture's, or one asking for a dynamic loader (a cgo build).
func checkStatic(file, goos, arch string) error {
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("binary for the image: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("binary for the image: %s is not a regular file", file)
	}
	if goos != "linux" {
		return nil
	}
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("binary for the image: %s is not an ELF executable: %w", file, err)
	}
	defer f.Close()
	if want, ok := machines[arch]; ok && f.Machine != want {
		return fmt.Errorf("binary for the image: %s is for %s, not %s (%s)", file, f.Machine, arch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("binary for the image: %s is dynamically linked (it needs an ELF interpreter); the base has no libc: build it static (CGO_ENABLED=0)", file)
		}
	}
	return nil
}
