package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	helmchart "helm.sh/helm/v4/pkg/chart/v2"
	helmloader "helm.sh/helm/v4/pkg/chart/v2/loader"
)

// Helm's media types for a chart stored in an OCI registry (helm.sh/helm/v4/pkg/registry), the
// ones `helm push` writes and `helm pull` and gardenlet (gardener's pkg/utils/oci) look for.
const (
	HelmConfigMediaType types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartMediaType  types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// HelmChart is the chart archive (a .tgz, as `helm package` writes it) as the OCI artifact
// `helm push` makes of it: an OCI image manifest whose config is the chart's metadata as JSON
// (HelmConfigMediaType) and whose one layer is the archive (HelmChartMediaType), with the
// annotations helm adds (title, version, description, url, created). created is the creation
// annotation's time (helm takes now; the release takes images.Epoch, so that the same chart
// gives the same digest). The artifact is a v1.Image, so images.Push writes it beside the images.
func HelmChart(archive []byte, created time.Time) (v1.Image, *helmchart.Metadata, error) {
	ch, err := helmloader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, nil, fmt.Errorf("the chart archive: %w", err)
	}
	meta := ch.Metadata
	if err := meta.Validate(); err != nil {
		return nil, nil, fmt.Errorf("the chart's metadata: %w", err)
	}
	// helm push's config: json.Marshal of the chart's metadata.
	config, err := json.Marshal(meta)
	if err != nil {
		return nil, nil, err
	}
	layer := static.NewLayer(archive, HelmChartMediaType)
	layerDigest, err := layer.Digest()
	if err != nil {
		return nil, nil, err
	}
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, nil, err
	}
	annotations := map[string]string{}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":       meta.Name,
		"org.opencontainers.image.version":     meta.Version,
		"org.opencontainers.image.description": meta.Description,
		"org.opencontainers.image.url":         meta.Home,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	} {
		if strings.TrimSpace(v) != "" {
			annotations[k] = v
		}
	}
	if len(meta.Sources) > 0 {
		annotations["org.opencontainers.image.source"] = meta.Sources[0]
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: HelmConfigMediaType, Size: configSize, Digest: configDigest},
		Layers:        []v1.Descriptor{{MediaType: HelmChartMediaType, Size: int64(len(archive)), Digest: layerDigest}},
		Annotations:   annotations,
	})
	if err != nil {
		return nil, nil, err
	}
	img, err := partial.CompressedToImage(&helmArtifact{config: config, manifest: manifest, layer: layer, layerDigest: layerDigest})
	if err != nil {
		return nil, nil, err
	}
	return img, meta, nil
}

// helmArtifact is the minimal core ggcr extends into a v1.Image.
type helmArtifact struct {
	config, manifest []byte
	layer            v1.Layer
	layerDigest      v1.Hash
}

func (a *helmArtifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *helmArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *helmArtifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *helmArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h == a.layerDigest {
		return a.layer, nil
	}
	return nil, fmt.Errorf("the chart artifact has no layer %s", h)
}

// ChartFromArtifact is what gardenlet and `helm pull` take from a chart artifact: its manifest
// must be an OCI image manifest with Helm's config media type and exactly one layer of Helm's
// chart media type, whose bytes (the .tgz) it returns with the config's metadata.
func ChartFromArtifact(img v1.Image) ([]byte, *helmchart.Metadata, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's manifest: %w", err)
	}
	var problems []error
	if m.MediaType != types.OCIManifestSchema1 {
		problems = append(problems, fmt.Errorf("manifest media type %q, want %q", m.MediaType, types.OCIManifestSchema1))
	}
	if m.Config.MediaType != HelmConfigMediaType {
		problems = append(problems, fmt.Errorf("config media type %q, want Helm's %q", m.Config.MediaType, HelmConfigMediaType))
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != HelmChartMediaType {
		var got []string
		for _, l := range m.Layers {
			got = append(got, string(l.MediaType))
		}
		problems = append(problems, fmt.Errorf("layers %q, want one of Helm's %q", got, HelmChartMediaType))
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("not a Helm chart as helm push writes it: %w", errors.Join(problems...))
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's config: %w", err)
	}
	meta := &helmchart.Metadata{}
	if err := json.Unmarshal(raw, meta); err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's config is not a chart's metadata: %w", err)
	}
	layer, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's layer: %w", err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's layer: %w", err)
	}
	defer rc.Close()
	archive, err := io.ReadAll(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("the chart artifact's layer: %w", err)
	}
	return archive, meta, nil
}
