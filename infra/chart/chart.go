// Package chart is housekeeper's Helm chart, embedded: rendered as gardenlet renders it (with
// gardener's chart renderer) by the tests, and packaged as a chart archive, the form a
// ControllerDeployment's helm.rawChart takes.
package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/gardener/gardener/pkg/chartrenderer"
	"k8s.io/apimachinery/pkg/version"
)

// Name is the chart's name, and the release name gardenlet gives it: the ControllerRegistration's.
const Name = "housekeeper"

// FS holds the chart's files as `helm package` takes them (this Go file aside, .helmignore):
// values.schema.json among them, against which Helm, and Render, check the values.
//
//go:embed Chart.yaml values.yaml values.schema.json .helmignore all:templates all:files
var FS embed.FS

// Render renders the chart's Archive into namespace with values, as gardenlet does for a
// ControllerInstallation, for a cluster of kubeVersion (e.g. "v1.36.3").
func Render(namespace string, values map[string]any, kubeVersion string) (*chartrenderer.RenderedChart, error) {
	return RenderFS(FS, namespace, values, kubeVersion)
}

// RenderFS renders the chart whose files are chartFiles (laid out as FS) as Render does: the
// tests render changed copies of the chart with it.
func RenderFS(chartFiles fs.FS, namespace string, values map[string]any, kubeVersion string) (*chartrenderer.RenderedChart, error) {
	var major, minor, patch int
	if _, err := fmt.Sscanf(kubeVersion, "v%d.%d.%d", &major, &minor, &patch); err != nil {
		return nil, fmt.Errorf("kubernetes version %q: %w", kubeVersion, err)
	}
	archive, err := archiveOf(chartFiles)
	if err != nil {
		return nil, err
	}
	v := &version.Info{GitVersion: kubeVersion, Major: strconv.Itoa(major), Minor: strconv.Itoa(minor)}
	return chartrenderer.NewWithServerVersion(v).RenderArchive(archive, Name, namespace, values)
}

// Archive is the chart as a gzipped tar archive under the directory housekeeper/, the layout
// `helm package` writes. It is the same for the same files (no timestamps).
func Archive() ([]byte, error) { return archiveOf(FS) }

func archiveOf(chartFiles fs.FS) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := fs.WalkDir(chartFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(chartFiles, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: Name + "/" + path, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	return buf.Bytes(), err
}
