// Package infra holds housekeeper's deployment material. Its Go side embeds the CRDs, so the
// test environment and the local stack install exactly what infra/crds and the chart ship.
package infra

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The Gardener CRD files (infra/crds) are copied from upstream Gardener by `make crds`,
// housekeeper's own (infra/chart/files/crds, installed by the chart) generated from
// functions/apis by `make apis`; never edit them by hand.
//
//go:embed crds/*.yaml chart/files/crds/*.yaml
var crdFiles embed.FS

// CRDFiles returns the CRD manifests by file name (relative to infra/).
func CRDFiles() (map[string][]byte, error) {
	var entries []string
	for _, pattern := range []string{"crds/*.yaml", "chart/files/crds/*.yaml"} {
		matched, err := fs.Glob(crdFiles, pattern)
		if err != nil {
			return nil, err
		}
		entries = append(entries, matched...)
	}
	files := make(map[string][]byte, len(entries))
	for _, name := range entries {
		data, err := crdFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		files[name] = data
	}
	return files, nil
}

// CRDs returns the CustomResourceDefinitions: BackupBucket, BackupEntry, BackupDestination,
// EtcdBackupConfig, RestoreDrill and BackupCopyPolicy.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := CRDFiles()
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for name, data := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("infra/%s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
