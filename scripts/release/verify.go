package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	helmloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// Verified is what a registration names, each found as it says.
type Verified struct {
	// ChartRef is helm.ociRepository's reference (empty for a rawChart), ChartDigest the
	// manifest digest the registry serves for it.
	ChartRef    string
	ChartDigest v1.Hash
	// Chart is the .tgz gardenlet would install; ChartVersion and AppVersion its Chart.yaml's.
	Chart                    []byte
	ChartVersion, AppVersion string
	// Images are the images the chart runs with the registration's values (rendered as
	// gardenlet renders it), each repository@digest, each served by its registry.
	Images []string
}

// Verify checks a registration (its YAML) the way gardenlet would use it, against the registry:
// it decodes into gardener's types; its chart is pulled by the ref (which must be pinned by
// digest, its tag the chart's version and still pointing at that digest) with Helm's media
// types, or taken from helm.rawChart; the chart's version and appVersion agree with the
// artifact's config and with image.tag v<appVersion>; the chart renders (gardener's chart
// renderer, for kubeVersion) with the registration's values and what gardenlet adds; and every
// image it renders is pinned by digest, served by its registry under that digest and labelled
// org.opencontainers.image.version v<appVersion>. Every problem found is in the error, each
// naming the reference. It pulls with the Docker config's credentials, as the release pushed.
func Verify(ctx context.Context, registration []byte, kubeVersion string, opts ...remote.Option) (*Verified, error) {
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	reg, dep, err := DecodeRegistration(registration)
	if err != nil {
		return nil, fmt.Errorf("the registration: %w", err)
	}
	values, err := Values(dep)
	if err != nil {
		return nil, err
	}
	v := &Verified{}
	var problems []error
	problem := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	// The chart.
	switch oci := dep.Helm.OCIRepository; {
	case oci != nil && len(dep.Helm.RawChart) > 0:
		return nil, errors.New("the ControllerDeployment has both helm.ociRepository and helm.rawChart")
	case oci != nil:
		v.ChartRef = oci.GetURL()
		// As gardenlet parses it (gardener's pkg/utils/oci: StrictValidation).
		ref, err := name.NewDigest(v.ChartRef, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("helm.ociRepository %q is not pinned by digest (repository:tag@sha256:…): %w", v.ChartRef, err)
		}
		img, err := remote.Image(ref, opts...)
		if err != nil {
			return nil, fmt.Errorf("the chart %s is not served: %w", v.ChartRef, err)
		}
		if v.ChartDigest, err = img.Digest(); err != nil {
			return nil, err
		}
		archive, meta, err := ChartFromArtifact(img)
		if err != nil {
			return nil, fmt.Errorf("the chart %s: %w", v.ChartRef, err)
		}
		v.Chart, v.ChartVersion, v.AppVersion = archive, meta.Version, meta.AppVersion
		if base, _, _ := strings.Cut(v.ChartRef, "@"); base != ref.Context().Name() {
			tag, err := name.NewTag(base, name.StrictValidation)
			if err != nil {
				return nil, fmt.Errorf("helm.ociRepository %q: %w", v.ChartRef, err)
			}
			if tag.TagStr() != meta.Version {
				problem("the chart %s: tag %s, but the artifact is version %s", v.ChartRef, tag.TagStr(), meta.Version)
			}
			if d, err := remote.Head(tag, opts...); err != nil {
				problem("the chart's tag %s is not served: %w", tag, err)
			} else if d.Digest != v.ChartDigest {
				problem("the chart's tag %s points at %s, the registration pins %s", tag, d.Digest, v.ChartDigest)
			}
		}
	case len(dep.Helm.RawChart) > 0:
		v.Chart = dep.Helm.RawChart
	default:
		return nil, errors.New("the ControllerDeployment has neither helm.ociRepository nor helm.rawChart")
	}
	ch, err := helmloader.LoadArchive(bytes.NewReader(v.Chart))
	if err != nil {
		return nil, fmt.Errorf("the registration's chart: %w", err)
	}
	if v.ChartRef != "" && (ch.Metadata.Version != v.ChartVersion || ch.Metadata.AppVersion != v.AppVersion) {
		problem("the chart artifact's config says version %s, appVersion %s; its Chart.yaml %s, %s",
			v.ChartVersion, v.AppVersion, ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	v.ChartVersion, v.AppVersion = ch.Metadata.Version, ch.Metadata.AppVersion
	if ch.Metadata.Name != chart.Name {
		problem("the registration's chart is %q, not %s", ch.Metadata.Name, chart.Name)
	}
	release := "v" + v.AppVersion
	if image, _ := values["image"].(map[string]any); image == nil || image["tag"] != release {
		var tag any
		if image != nil {
			tag = image["tag"]
		}
		problem("the values' image.tag is not %s, the chart's appVersion's, but %v", release, tag)
	}

	// The images, as the chart renders them for a seed.
	rendered, err := renderForSeed(v.Chart, values, reg.Spec.Resources, kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("the registration's chart with its values: %w", err)
	}
	v.Images = ContainerImages(rendered)
	if len(v.Images) == 0 {
		problem("the chart renders no container with the registration's values")
	}
	for _, s := range v.Images {
		ref, err := name.NewDigest(s, name.StrictValidation)
		if err != nil {
			problem("the image %s is not pinned by digest", s)
			continue
		}
		img, err := remote.Image(ref, opts...)
		if err != nil {
			problem("the image %s is not served: %w", s, err)
			continue
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			problem("the image %s: its config: %w", s, err)
			continue
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != release {
			problem("the image %s is labelled version %q, the chart's release is %s", s, got, release)
		}
	}
	return v, errors.Join(problems...)
}

// renderForSeed renders archive with values as gardenlet does for a ControllerInstallation:
// what it adds under gardener (the seed, whose provider is the first registered type).
func renderForSeed(archive []byte, values map[string]any, resources []gardencorev1beta1.ControllerResource, kubeVersion string) ([]byte, error) {
	provider := "local"
	for _, r := range resources {
		if r.Kind == "BackupBucket" {
			provider = r.Type
			break
		}
	}
	withSeed := make(map[string]any, len(values)+1)
	for k, val := range values {
		withSeed[k] = val
	}
	withSeed["gardener"] = map[string]any{
		"garden": map[string]any{"clusterIdentity": "garden"},
		"seed":   map[string]any{"name": "release-check", "clusterIdentity": "seed-release-check", "provider": provider, "region": "region-1"},
	}
	return renderChart(archive, withSeed, "extension-housekeeper-release", kubeVersion)
}

// renderChart renders archive with values into namespace with gardener's chart renderer, for
// kubeVersion, as gardenlet and gardener-operator render it.
func renderChart(archive []byte, values map[string]any, namespace, kubeVersion string) ([]byte, error) {
	var major, minor, patch int
	if _, err := fmt.Sscanf(kubeVersion, "v%d.%d.%d", &major, &minor, &patch); err != nil {
		return nil, fmt.Errorf("kubernetes version %q: %w", kubeVersion, err)
	}
	info := &version.Info{GitVersion: kubeVersion, Major: strconv.Itoa(major), Minor: strconv.Itoa(minor)}
	r, err := chartrenderer.NewWithServerVersion(info).RenderArchive(archive, chart.Name, namespace, values)
	if err != nil {
		return nil, err
	}
	return r.Manifest(), nil
}

// ContainerImages are the distinct images of every container and init container in a
// rendered manifest, sorted.
func ContainerImages(manifest []byte) []string {
	var out []string
	var walk func(any)
	walk = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			for k, c := range n {
				if k == "containers" || k == "initContainers" {
					if list, ok := c.([]any); ok {
						for _, item := range list {
							if m, ok := item.(map[string]any); ok {
								if img, ok := m["image"].(string); ok {
									out = append(out, img)
								}
							}
						}
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	docs, _ := splitYAML(manifest)
	for _, doc := range docs {
		var obj any
		if yaml.Unmarshal(doc, &obj) == nil {
			walk(obj)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
