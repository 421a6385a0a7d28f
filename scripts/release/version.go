package release

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/version"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
)

// semver is a SemVer 2 version without build metadata: MAJOR.MINOR.PATCH[-PRERELEASE]. Build
// metadata (+…) is refused: an image tag cannot carry a +, and helm would push the chart
// under another tag (+ becomes _) than the one its version says.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// ChartVersions are infra/chart/Chart.yaml's version and appVersion, as this program embeds
// the chart.
func ChartVersions() (chartVersion, appVersion string, err error) {
	data, err := chart.FS.ReadFile("Chart.yaml")
	if err != nil {
		return "", "", err
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return "", "", fmt.Errorf("infra/chart/Chart.yaml: %w", err)
	}
	return meta.Version, meta.AppVersion, nil
}

// CheckVersion refuses a release version v that is not this source tree's: a release is cut
// from a tree that already says its version — infra/chart/Chart.yaml's version and appVersion
// and functions/version.Version (what `housekeeper --version` prints) — so that the binaries,
// the images' tag v<v>, the chart and the chart's default image tag all agree, and the same
// commit built by hand (make images, helm package) gives the same thing. Nothing is stamped.
func CheckVersion(v string) error {
	if v == "" {
		return fmt.Errorf("no release version: give VERSION=%s (this tree's, functions/version.Version)", version.Version)
	}
	if rest, ok := strings.CutPrefix(v, "v"); ok {
		return fmt.Errorf("VERSION %q: give it without the v (%s); the images are tagged v<VERSION>", v, rest)
	}
	if !semver.MatchString(v) {
		return fmt.Errorf("VERSION %q is not a SemVer version MAJOR.MINOR.PATCH[-PRERELEASE] (without +build metadata, which no image tag can carry)", v)
	}
	chartVersion, appVersion, err := ChartVersions()
	if err != nil {
		return err
	}
	var differ []string
	for _, s := range []struct{ what, got string }{
		{"infra/chart/Chart.yaml's version", chartVersion},
		{"infra/chart/Chart.yaml's appVersion", appVersion},
		{"functions/version.Version (housekeeper --version)", version.Version},
	} {
		if s.got != v {
			differ = append(differ, fmt.Sprintf("%s is %q", s.what, s.got))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("VERSION %s is not this tree's release: %s. A release is cut from a commit that says its version: set Chart.yaml's version and appVersion and functions/version.Version to %s (and give it a CHANGELOG.md section), commit, then release",
			v, strings.Join(differ, ", "), v)
	}
	return nil
}
