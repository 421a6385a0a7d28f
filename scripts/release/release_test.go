package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenoci "github.com/gardener/gardener/pkg/utils/oci"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	helmchart "helm.sh/helm/v4/pkg/chart/v2"
	helmloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/version"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// fixture is one release of this tree to a registry on loopback, made once for the package's
// tests: the images the shipped registration's chart runs (not all six: the test stays cheap;
// make release publishes every one), the chart, both registrations.
type fixture struct {
	opts     Options
	res      *Result
	shipped  []byte
	took     time.Duration
	registry string // host:port
	kube     string // the Kubernetes version the chart is rendered for
}

var (
	fixtureOnce sync.Once
	theFixture  *fixture
	fixtureErr  error
	server      *httptest.Server
)

func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.Close()
	}
	if theFixture != nil {
		os.RemoveAll(theFixture.opts.OutDir)
	}
	os.Exit(code)
}

func released(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		// The loopback registry wants a login, as a private registry does: the release and
		// make images push with the Docker config's credentials (this test's, none of this
		// machine's), and gardenlet pulls the chart with a registration's pull secret.
		server = httptest.NewServer(requireLogin(registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
		host := strings.TrimPrefix(server.URL, "http://")
		out, err := os.MkdirTemp("", "release-test-")
		if err != nil {
			fixtureErr = err
			return
		}
		if fixtureErr = writeDockerConfig(filepath.Join(out, "docker"), host); fixtureErr != nil {
			return
		}
		os.Setenv("DOCKER_CONFIG", filepath.Join(out, "docker"))
		f := &fixture{registry: host, opts: Options{
			Version:    version.Version,
			Registry:   host + "/housekeeper-dev",
			OutDir:     out,
			AllowDirty: true, // the tree under test may have changes
		}}
		theFixture = f
		if f.shipped, fixtureErr = os.ReadFile(filepath.Join("..", "..", RegistrationFile)); fixtureErr != nil {
			return
		}
		// Only what the registration needs.
		probe := f.opts
		if fixtureErr = probe.defaults(); fixtureErr != nil {
			return
		}
		if f.opts.Only, fixtureErr = probe.neededImages(f.shipped); fixtureErr != nil {
			return
		}
		f.kube = probe.KubeVersion
		// As make release runs it: the command, built without -race (under the race detector
		// compressing the images took a minute).
		// No deadline but go test's: on a fresh machine the command is compiled first.
		start := time.Now()
		cmd := exec.Command("go", "run", "./scripts/cmd/release", "-version", f.opts.Version, "-registry", f.opts.Registry,
			"-o", f.opts.OutDir, "-only", strings.Join(f.opts.Only, ","), "-allow-dirty")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if fixtureErr = cmd.Run(); fixtureErr != nil {
			fixtureErr = fmt.Errorf("make release: %w", fixtureErr)
			return
		}
		f.took = time.Since(start)
		var summary []byte
		if summary, fixtureErr = os.ReadFile(filepath.Join(out, ResultName)); fixtureErr != nil {
			return
		}
		f.res = &Result{}
		fixtureErr = json.Unmarshal(summary, f.res)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return theFixture
}

// The release's images, pulled back by tag and by digest: the ones pushed, valid, labelled
// with the release, and their binary, run, says the release (when this machine can run it).
func TestImagesPulledBack(t *testing.T) {
	f := released(t)
	t.Logf("the release (%s) took %s", strings.Join(f.opts.Only, ", "), f.took.Round(time.Millisecond))
	if got := pushedNames(f.res.Images); !slices.Equal(sorted(got), sorted(f.opts.Only)) {
		t.Fatalf("pushed %v, asked for %v", got, f.opts.Only)
	}
	deployables := map[string]images.Deployable{}
	for _, d := range images.Deployables() {
		deployables[d.Name] = d
	}
	for _, p := range f.res.Images {
		wantRef := f.opts.Registry + "/" + p.Name + ":v" + version.Version
		if p.Ref != wantRef {
			t.Errorf("%s pushed as %s, want %s", p.Name, p.Ref, wantRef)
		}
		byTag, byDigest := pull(t, p.Ref), pull(t, p.Pinned())
		for _, img := range []v1.Image{byTag, byDigest} {
			if d, _ := img.Digest(); d != p.Digest {
				t.Errorf("%s: the registry serves %s, the release says %s", p.Name, d, p.Digest)
			}
		}
		// Every blob as the registry serves it: ggcr checks each against its digest as it reads.
		layers, err := byDigest.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			if err != nil {
				t.Errorf("%s: a layer: %v", p.Name, err)
			}
		}
		cfg, err := byDigest.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		labels := cfg.Config.Labels
		if labels["org.opencontainers.image.version"] != "v"+version.Version || labels["org.opencontainers.image.title"] != p.Name ||
			!strings.HasSuffix(labels["org.opencontainers.image.revision"], "-dirty") && len(labels["org.opencontainers.image.revision"]) != 40 {
			t.Errorf("%s: labels %v", p.Name, labels)
		}
		if runtime.GOOS == "linux" && cfg.Architecture == runtime.GOARCH {
			bin := extract(t, byDigest, deployables[p.Name].Path)
			out, err := exec.Command(bin, "--version").Output()
			if err != nil {
				t.Fatalf("%s --version from the pulled image: %v", p.Name, err)
			}
			if got := strings.Fields(string(out)); len(got) != 2 || got[1] != version.Version {
				t.Errorf("%s --version from the pulled image: %q, want the release %s", p.Name, out, version.Version)
			}
		}
	}
}

// The release builds its images as `make images` does (scripts/cmd/images, which it does not
// import): both call images.Build (whose images scripts/images checks), and this checks they
// give it the same inputs — tag, revision, time, architecture — so that the same commit and tag
// give the same digests and the two cannot drift apart.
func TestSameImagesAsMakeImages(t *testing.T) {
	f := released(t)
	p := f.res.Images[slices.IndexFunc(f.res.Images, func(p Pushed) bool { return p.Name == "housekeeper-bridge" })]
	cfg, err := pull(t, p.Pinned()).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./scripts/cmd/images", "-push", "-registry", f.registry+"/make-images",
		"-tag", "v"+version.Version, "-only", p.Name, "-revision", cfg.Config.Labels["org.opencontainers.image.revision"])
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	if d, _ := pull(t, f.registry+"/make-images/"+p.Name+":v"+version.Version).Digest(); d != p.Digest {
		t.Errorf("%s: make images builds %s, the release %s", p.Name, d, p.Digest)
	}
}

// The chart, pulled back as gardenlet pulls it (gardener's own OCI puller, from the
// registration's helm.ociRepository) and by its tag: Helm's media types, the chart's metadata
// as config, the very archive this tree packages, the same as the inline registration's.
func TestChartPulledBack(t *testing.T) {
	f := released(t)
	_, dep := decodeFile(t, f.res.Registration)
	if dep.Helm.OCIRepository == nil || len(dep.Helm.RawChart) > 0 {
		t.Fatalf("%s: helm %+v, want ociRepository alone", RegistrationName, dep.Helm)
	}
	ref := *dep.Helm.OCIRepository.Ref
	if want := f.opts.Registry + "/charts/housekeeper:" + version.Version + "@" + f.res.Chart.Digest.String(); ref != want {
		t.Errorf("helm.ociRepository.ref %s, want %s", ref, want)
	}
	ctx := context.Background()
	pulled, err := pullChart(ctx, dep.Helm.OCIRepository)
	if err != nil {
		t.Fatalf("gardener's OCI puller: %v", err)
	}
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled, archive) {
		t.Error("the chart gardenlet pulls is not this tree's chart archive")
	}
	if file, _ := os.ReadFile(f.res.ChartArchive); !bytes.Equal(file, archive) {
		t.Errorf("%s is not this tree's chart archive", f.res.ChartArchive)
	}
	_, inline := decodeFile(t, f.res.InlineRegistration)
	if inline.Helm.OCIRepository != nil || !bytes.Equal(inline.Helm.RawChart, archive) {
		t.Errorf("%s: helm.rawChart is not the chart archive (or ociRepository is set)", InlineRegistrationName)
	}

	// By its tag, as `helm pull oci://…/charts/housekeeper --version X` resolves it.
	img := pull(t, f.res.Chart.Ref)
	if d, _ := img.Digest(); d != f.res.Chart.Digest {
		t.Errorf("the chart's tag serves %s, the release says %s", d, f.res.Chart.Digest)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		MediaType string
		Config    struct{ MediaType string }
		Layers    []struct{ MediaType string }
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Errorf("the chart's manifest is not Helm's:\n%s", raw)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := helmloader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	var meta helmchart.Metadata
	if err := json.Unmarshal(config, &meta); err != nil {
		t.Fatalf("the chart's config: %v", err)
	}
	if !reflect.DeepEqual(&meta, ch.Metadata) {
		t.Errorf("the chart's config is not its metadata:\n got %+v\nwant %+v", meta, ch.Metadata)
	}
	if meta.Version != version.Version || meta.AppVersion != version.Version {
		t.Errorf("the chart pulled is version %s, appVersion %s; the release %s", meta.Version, meta.AppVersion, version.Version)
	}
}

// The registrations decode into gardener's types, keep the shipped registration and values
// but the image's, and name exactly what was pushed: the chart, pulled as gardenlet pulls it,
// renders with their values for a seed to containers whose images are the pushed ones, by
// digest.
func TestRegistrationNamesWhatWasPushed(t *testing.T) {
	f := released(t)
	shippedReg, shippedDep := decodeBytes(t, RegistrationFile, f.shipped)
	shippedValues, err := Values(shippedDep)
	if err != nil {
		t.Fatal(err)
	}
	pushed := map[string]string{}
	var pinned []string
	for _, p := range f.res.Images {
		pushed[p.Name] = p.Digest.String()
		pinned = append(pinned, p.Pinned())
	}
	slices.Sort(pinned)
	var manifests [][]byte
	for _, file := range []string{f.res.Registration, f.res.InlineRegistration} {
		reg, dep := decodeFile(t, file)
		if !reflect.DeepEqual(reg.Spec, shippedReg.Spec) || reg.Name != shippedReg.Name || dep.Name != shippedDep.Name {
			t.Errorf("%s: the ControllerRegistration or the deployment's name differ from %s's", file, RegistrationFile)
		}
		values, err := Values(dep)
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(shippedValues)
		image := map[string]any{}
		if shipped, ok := shippedValues["image"].(map[string]any); ok {
			image = maps.Clone(shipped)
		}
		image["registry"], image["tag"] = f.opts.Registry, "v"+version.Version
		image["digests"] = map[string]any{}
		for n, d := range pushed {
			image["digests"].(map[string]any)[n] = d
		}
		want["image"] = image
		if !reflect.DeepEqual(values, want) {
			t.Errorf("%s: values\n%v\nwant the shipped ones with the release's image\n%v", file, values, want)
		}

		var archive []byte
		if dep.Helm.OCIRepository != nil {
			if archive, err = pullChart(context.Background(), dep.Helm.OCIRepository); err != nil {
				t.Fatal(err)
			}
		} else {
			archive = dep.Helm.RawChart
		}
		manifest, err := renderForSeed(archive, values, reg.Spec.Resources, f.kube)
		if err != nil {
			t.Fatalf("%s: rendering its chart with its values: %v", file, err)
		}
		manifests = append(manifests, manifest)
		if got := ContainerImages(manifest); !slices.Equal(got, pinned) {
			t.Errorf("%s: the chart runs\n%v\nthe release pushed\n%v", file, got, pinned)
		}

		v, err := Verify(context.Background(), mustRead(t, file), f.kube)
		if err != nil {
			t.Errorf("%s: %v", file, err)
		} else if !slices.Equal(v.Images, pinned) || v.ChartVersion != version.Version || v.AppVersion != version.Version {
			t.Errorf("%s verified: %+v", file, v)
		}
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Error("the chart from the registry and the inline chart render differently")
	}
}

// Verify, which the release runs on what it writes, fails on a registration that names what
// was not pushed, or not by digest.
func TestVerifyRefusesWhatWasNotPushed(t *testing.T) {
	f := released(t)
	ctx := context.Background()
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, p := range f.res.Images {
		digests[p.Name] = p.Digest.String()
	}
	good := Registration{Version: version.Version, Registry: f.opts.Registry, Tag: "v" + version.Version, Digests: digests,
		ChartRef: f.res.Chart.Ref + "@" + f.res.Chart.Digest.String()}
	bogus := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	chartRepo := strings.TrimSuffix(f.res.Chart.Ref, ":"+version.Version)

	cases := []struct {
		what string
		edit func(r *Registration)
		want []string
	}{
		{"a chart digest not pushed", func(r *Registration) { r.ChartRef = f.res.Chart.Ref + "@" + bogus.String() },
			[]string{"the chart " + f.res.Chart.Ref + "@" + bogus.String() + " is not served"}},
		{"the chart by tag alone", func(r *Registration) { r.ChartRef = f.res.Chart.Ref }, []string{"is not pinned by digest"}},
		{"a chart tag not pushed", func(r *Registration) { r.ChartRef = chartRepo + ":9.9.9@" + f.res.Chart.Digest.String() },
			[]string{"tag 9.9.9, but the artifact is version " + version.Version, "the chart's tag " + chartRepo + ":9.9.9 is not served"}},
		{"a chart in another repository", func(r *Registration) {
			r.ChartRef = f.registry + "/elsewhere/housekeeper:" + version.Version + "@" + f.res.Chart.Digest.String()
		}, []string{"/elsewhere/housekeeper:" + version.Version + "@" + f.res.Chart.Digest.String() + " is not served"}},
		{"an image digest not pushed", func(r *Registration) {
			r.Digests = maps.Clone(digests)
			r.Digests["housekeeper-bridge"] = bogus.String()
		}, []string{"the image " + f.opts.Registry + "/housekeeper-bridge@" + bogus.String() + " is not served"}},
		{"images of another registry", func(r *Registration) { r.Registry = f.registry + "/elsewhere" },
			[]string{"the image " + f.registry + "/elsewhere/housekeeper-bridge@" + digests["housekeeper-bridge"] + " is not served"}},
		{"images by tag", func(r *Registration) { r.Digests = nil },
			[]string{"the image " + f.opts.Registry + "/housekeeper-bridge:v" + version.Version + " is not pinned by digest"}},
		{"another release's tag", func(r *Registration) { r.Tag = "v9.9.9" }, []string{"image.tag is not v" + version.Version}},
		{"inline, an image digest not pushed", func(r *Registration) {
			r.ChartRef, r.Chart = "", archive
			r.Digests = maps.Clone(digests)
			r.Digests["housekeeper-bridge"] = bogus.String()
		}, []string{"housekeeper-bridge@" + bogus.String() + " is not served"}},
	}
	for _, c := range cases {
		r := good
		c.edit(&r)
		data, err := r.Write(f.shipped)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(ctx, data, f.kube)
		if err == nil {
			t.Errorf("%s: verified", c.what)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n%v\nwant it to say %q", c.what, err, w)
			}
		}
	}
	// The unedited registration holds.
	data, err := good.Write(f.shipped)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, data, f.kube); err != nil {
		t.Errorf("the release's registration: %v", err)
	}
}

// What a release refuses, it refuses before building anything, naming why.
func TestRefusals(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	base := Options{Version: version.Version, Registry: "127.0.0.1:1/housekeeper-dev", OutDir: t.TempDir(), Root: root, AllowDirty: true}
	cases := []struct {
		what string
		edit func(o *Options)
		want string
	}{
		{"another version", func(o *Options) { o.Version = "9.9.9" },
			"VERSION 9.9.9 is not this tree's release: infra/chart/Chart.yaml's version is \"" + version.Version + "\""},
		{"a leading v", func(o *Options) { o.Version = "v" + version.Version }, "without the v (" + version.Version + ")"},
		{"not SemVer", func(o *Options) { o.Version = "1.0" }, "not a SemVer version"},
		{"build metadata", func(o *Options) { o.Version = version.Version + "+1" }, "+build metadata"},
		{"no version", func(o *Options) { o.Version = "" }, "give VERSION=" + version.Version},
		{"no registry", func(o *Options) { o.Registry = "" }, "no REGISTRY"},
		{"an unknown image", func(o *Options) { o.Only = []string{"housekeeper-nope"} }, `no image "housekeeper-nope"`},
		{"an image the registration needs left out", func(o *Options) { o.Only = []string{"housekeeper-bridge"} },
			"the registration's chart runs the image housekeeper-azure, which is not among the images selected (housekeeper-bridge)"},
	}
	for _, c := range cases {
		o := base
		var logged []string
		o.Log = func(s string) { logged = append(logged, s) }
		c.edit(&o)
		_, err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.what, err, c.want)
		}
		if len(logged) > 0 {
			t.Errorf("%s: went on to %q", c.what, logged)
		}
	}

	// A work tree with changes, unless allowed.
	dir := t.TempDir()
	for _, f := range []string{RegistrationFile, ExtensionFile, "scripts/versions.env"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), mustRead(t, filepath.Join(root, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "x")
	if err := os.WriteFile(filepath.Join(dir, "changed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := base
	o.Root, o.AllowDirty = dir, false
	o.Log = func(s string) { t.Errorf("a dirty tree went on to %q", s) }
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "the work tree has 1 uncommitted changes (first: ?? changed)") {
		t.Errorf("a dirty tree: %v", err)
	}
}

func pull(t *testing.T, s string) v1.Image {
	t.Helper()
	ref, err := images.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithContext(context.Background()), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatalf("pulling %s: %v", s, err)
	}
	return img
}

// The registry's login, which the Docker config of the test holds.
var registryUser, registryPassword = "release-test", rand.Text()

// requireLogin answers every request without the registry's login with 401 and a Basic
// challenge, as a private registry does.
func requireLogin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != registryUser || p != registryPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="release test"`)
			http.Error(w, "login required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// writeDockerConfig writes what `docker login host` writes into dir/config.json.
func writeDockerConfig(dir, host string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), dockerConfigJSON(host), 0o600)
}

func dockerConfigJSON(host string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
	return fmt.Appendf(nil, `{"auths": {%q: {"auth": %q}}}`, host, auth)
}

// chartPullSecret is the Secret of infra/docs/deploy.md's "Private registries" that a
// registration's helm.ociRepository.pullSecretRef names, in the garden namespace.
const chartPullSecret = "housekeeper-chart-pull"

// pullChart pulls a registration's chart as gardenlet does (gardener's OCI puller) with
// pullSecretRef added as the docs say.
func pullChart(ctx context.Context, oci *gardencorev1.OCIRepository) ([]byte, error) {
	withSecret := oci.DeepCopy()
	withSecret.PullSecretRef = &corev1.LocalObjectReference{Name: chartPullSecret}
	ref, err := images.ParseReference(withSecret.GetURL())
	if err != nil {
		return nil, err
	}
	garden := fakeclient.NewClientBuilder().WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: chartPullSecret, Labels: map[string]string{"gardener.cloud/role": "helm-pull-secret"}},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON(ref.Context().RegistryStr())},
	}).Build()
	return gardenoci.NewHelmRegistry(garden).Pull(ctx, withSecret)
}

// The registry of these tests refuses what a private one refuses: a pull without its login,
// the chart pulled by gardenlet without a pull secret.
func TestRegistryWantsALogin(t *testing.T) {
	f := released(t)
	ref, err := images.ParseReference(f.res.Chart.Ref + "@" + f.res.Chart.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	var terr *transport.Error
	if _, err := remote.Head(ref, remote.WithContext(context.Background())); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Errorf("an anonymous pull of %s: %v, want 401", ref, err)
	}
	// By its tag: gardener's puller keeps a chart pulled by digest and serves it again without
	// asking the registry.
	byTag := &gardencorev1.OCIRepository{Ref: ptr.To(f.res.Chart.Ref)}
	if _, err := gardenoci.NewHelmRegistry(nil).Pull(context.Background(), byTag); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("gardener's OCI puller without a pull secret: %v, want the registry's 401", err)
	}
	if _, err := pullChart(context.Background(), byTag); err != nil {
		t.Errorf("with the pull secret: %v", err)
	}
}

// extract writes the file at path in img's last layer (the binary's) into a temporary
// directory, with tar and gzip, which the race detector does not slow down as it does Go's
// inflate, and returns its name there.
func extract(t *testing.T, img v1.Image, path string) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("the image's layers: %v (%d)", err, len(layers))
	}
	rc, err := layers[len(layers)-1].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dir := t.TempDir()
	cmd := exec.Command("tar", "-xzf", "-", "-C", dir, strings.TrimPrefix(path, "/"))
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar -x %s: %v\n%s", path, err, out)
	}
	return filepath.Join(dir, path)
}

func decodeFile(t *testing.T, file string) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	t.Helper()
	return decodeBytes(t, file, mustRead(t, file))
}

func decodeBytes(t *testing.T, what string, data []byte) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	t.Helper()
	reg, dep, err := DecodeRegistration(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return reg, dep
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func pushedNames(ps []Pushed) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// The release's Extension decodes strictly into gardener-operator's type, keeps the shipped
// Extension but the chart and the images, names the chart pushed (by digest, pulled as
// gardener-operator pulls it) and, in both its values, the images pushed; VerifyExtension,
// which the release ran on it, holds, and refuses an Extension whose runtime cluster would run
// an image the seeds' values do not.
func TestExtensionNamesWhatWasPushed(t *testing.T) {
	f := released(t)
	shipped, err := DecodeExtension(mustRead(t, filepath.Join("..", "..", ExtensionFile)))
	if err != nil {
		t.Fatalf("%s: %v", ExtensionFile, err)
	}
	data := mustRead(t, f.res.Extension)
	ext, err := DecodeExtension(data)
	if err != nil {
		t.Fatalf("%s: %v", f.res.Extension, err)
	}
	if ext.Name != shipped.Name || !reflect.DeepEqual(ext.Spec.Resources, shipped.Spec.Resources) {
		t.Errorf("%s: the name or the resources differ from %s's", f.res.Extension, ExtensionFile)
	}
	if got, want := ext.Spec.Deployment.ExtensionDeployment.Helm.OCIRepository.GetURL(), f.res.Chart.Ref+"@"+f.res.Chart.Digest.String(); got != want {
		t.Errorf("the Extension's chart is %s, the release pushed %s", got, want)
	}
	archive, err := pullChart(context.Background(), ext.Spec.Deployment.ExtensionDeployment.Helm.OCIRepository)
	if err != nil {
		t.Fatal(err)
	}
	if local, _ := chart.Archive(); !bytes.Equal(archive, local) {
		t.Error("the chart pulled for the Extension is not this tree's")
	}
	pushed := map[string]any{}
	for _, p := range f.res.Images {
		pushed[p.Name] = p.Digest.String()
	}
	for what, pair := range map[string][2]*apiextensionsv1.JSON{
		"values":               {ext.Spec.Deployment.ExtensionDeployment.Values, shipped.Spec.Deployment.ExtensionDeployment.Values},
		"runtimeClusterValues": {ext.Spec.Deployment.ExtensionDeployment.RuntimeClusterValues, shipped.Spec.Deployment.ExtensionDeployment.RuntimeClusterValues},
	} {
		var got, want map[string]any
		if err := json.Unmarshal(pair[0].Raw, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(pair[1].Raw, &want); err != nil {
			t.Fatal(err)
		}
		image, _ := want["image"].(map[string]any)
		image = maps.Clone(image)
		if image == nil {
			image = map[string]any{}
		}
		image["registry"], image["tag"], image["digests"] = f.opts.Registry, "v"+version.Version, pushed
		want["image"] = image
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the Extension's %s\n%v\nwant the shipped ones with the release's image\n%v", what, got, want)
		}
	}
	v, err := VerifyExtension(context.Background(), data, f.kube)
	if err != nil {
		t.Fatal(err)
	}
	var pinned []string
	for _, p := range f.res.Images {
		pinned = append(pinned, p.Pinned())
	}
	if !slices.Equal(v.Images, sorted(pinned)) {
		t.Errorf("the Extension runs %v, the release pushed %v", v.Images, sorted(pinned))
	}

	// The runtime cluster's values serving another type: the chart would run housekeeper-aws,
	// which the seeds' values (and this release) do not.
	var runtimeValues map[string]any
	if err := json.Unmarshal(ext.Spec.Deployment.ExtensionDeployment.RuntimeClusterValues.Raw, &runtimeValues); err != nil {
		t.Fatal(err)
	}
	runtimeValues["types"] = []any{"aws"}
	raw, _ := json.Marshal(runtimeValues)
	ext.Spec.Deployment.ExtensionDeployment.RuntimeClusterValues = &apiextensionsv1.JSON{Raw: raw}
	ext.APIVersion, ext.Kind = "operator.gardener.cloud/v1alpha1", "Extension"
	changed, err := sigsyaml.Marshal(ext)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyExtension(context.Background(), changed, f.kube); err == nil || !strings.Contains(err.Error(), "runs the image "+f.opts.Registry+"/housekeeper-aws") {
		t.Errorf("VerifyExtension of an Extension whose runtime cluster runs housekeeper-aws: %v", err)
	}
}

// WriteExtension, without a registry: the shipped Extension with the chart and images set
// decodes strictly; an Extension takes no inline chart.
func TestWriteExtension(t *testing.T) {
	shipped := mustRead(t, filepath.Join("..", "..", ExtensionFile))
	r := Registration{Version: "0.1.0", Registry: "registry.example/hk", Tag: "v0.1.0", Digests: map[string]string{"housekeeper-bridge": "sha256:" + strings.Repeat("a", 64)},
		ChartRef: "registry.example/hk/charts/housekeeper:0.1.0@sha256:" + strings.Repeat("b", 64)}
	data, err := r.WriteExtension(shipped)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := DecodeExtension(data)
	if err != nil {
		t.Fatalf("the written Extension: %v\n%s", err, data)
	}
	if got := ext.Spec.Deployment.ExtensionDeployment.Helm.OCIRepository.GetURL(); got != r.ChartRef {
		t.Errorf("chart %s, want %s", got, r.ChartRef)
	}
	values, err := RuntimeValues(ext)
	if err != nil {
		t.Fatal(err)
	}
	if image := values["image"].(map[string]any); image["registry"] != r.Registry || image["tag"] != r.Tag || image["digests"].(map[string]any)["housekeeper-bridge"] != r.Digests["housekeeper-bridge"] {
		t.Errorf("runtimeClusterValues' image %v", image)
	}
	r.ChartRef, r.Chart = "", []byte("chart")
	if _, err := r.WriteExtension(shipped); err == nil {
		t.Error("an Extension with the chart inline was written")
	}
	if _, err := DecodeExtension(append(shipped, []byte("  unknownField: 1\n")...)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("an Extension with an unknown field: %v", err)
	}
}
