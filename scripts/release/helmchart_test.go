package release

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	helmloader "helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// The chart artifact is what helm push writes: an OCI manifest, the chart's metadata as
// json.Marshal writes it as config, the archive as the one layer, helm's annotations; the same
// chart and time give the same digest; ChartFromArtifact gives back the archive.
func TestHelmChart(t *testing.T) {
	archive, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(0, 0)
	img, meta, err := HelmChart(archive, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("the artifact does not validate: %v", err)
	}
	ch, err := helmloader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	wantConfig, _ := json.Marshal(ch.Metadata)
	if config, _ := img.RawConfigFile(); !bytes.Equal(config, wantConfig) {
		t.Errorf("config\n%s\nwant helm push's\n%s", config, wantConfig)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"org.opencontainers.image.title":       "housekeeper",
		"org.opencontainers.image.version":     meta.Version,
		"org.opencontainers.image.description": meta.Description,
		"org.opencontainers.image.url":         meta.Home,
		"org.opencontainers.image.created":     "1970-01-01T00:00:00Z",
	}
	for k, v := range want {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s=%q, want %q", k, m.Annotations[k], v)
		}
	}
	if len(m.Annotations) != len(want) {
		t.Errorf("annotations %v, want %v", m.Annotations, want)
	}
	d1, _ := img.Digest()
	again, _, err := HelmChart(archive, created)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := again.Digest(); d1 != d2 {
		t.Errorf("the same chart twice: %s and %s", d1, d2)
	}
	got, gotMeta, err := ChartFromArtifact(img)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, archive) || gotMeta.Version != meta.Version || gotMeta.AppVersion != meta.AppVersion {
		t.Errorf("ChartFromArtifact: %d bytes, %+v", len(got), gotMeta)
	}

	// An image is not a chart.
	if _, _, err := ChartFromArtifact(empty.Image); err == nil || !strings.Contains(err.Error(), "not a Helm chart as helm push writes it") {
		t.Errorf("an empty image as a chart: %v", err)
	}
	var _ v1.Image = img
}
